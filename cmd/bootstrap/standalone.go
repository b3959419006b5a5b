package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"cluster-init.dev/cluster-init/internal/bootstrap"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/secrets"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/statedir"
	"cluster-init.dev/cluster-init/internal/termtext"
)

// standaloneKey is the age key of standalone states: the user's (--age-key-file,
// $SOPS_AGE_KEY_FILE, $SOPS_AGE_KEY), else cluster-init's own, created for a new cluster.
func (g *globals) standaloneKey(create bool) (*standalone.Key, error) {
	user, err := secrets.LoadKey(g.ageKeyFile)
	if err != nil {
		return nil, err
	}
	return standalone.LoadKey(user, create)
}

// standaloneEnv is the environment a standalone command names: a state's environment as given,
// or, from a checkout, the environment a path resolves to.
func (g *globals) standaloneEnv(stateDir statedir.Dir, arg string) string {
	if d, err := standalone.DirOf(stateDir.Standalone(), arg); err == nil {
		if ok, _ := d.Exists(); ok {
			return arg
		}
	}
	if root, err := g.checkoutRoot(); err == nil {
		if name, _, err := environment.Resolve(root, arg); err == nil {
			return name
		}
	}
	return arg
}

// manageFlags are the flags of the commands that change a standalone cluster.
type manageFlags struct {
	timeout  time.Duration
	output   string
	timeline string
}

func addManageFlags(cmd *cobra.Command, f *manageFlags) {
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Minute, "give up after this long (the temporary management cluster is kept; run the command again to finish)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "tty (redraw in place), plain (timestamped lines) or json (default: tty on a terminal, else plain)")
	cmd.Flags().StringVar(&f.timeline, "timeline", "", "write a timeline of the run to this file (HTML, or SVG if it ends in .svg)")
}

func (g *globals) runManage(cmd *cobra.Command, arg string, f *manageFlags, change standalone.Change) error {
	stateDir, err := stateDir()
	if err != nil {
		return err
	}
	key, err := g.standaloneKey(false)
	if err != nil {
		return err
	}
	env := g.standaloneEnv(stateDir, arg)
	start := time.Now()
	printer, err := g.printer(cmd, f.output, start)
	if err != nil {
		return err
	}
	res, err := bootstrap.Manage(cmd.Context(), bootstrap.ManageOptions{
		Common: bootstrap.Common{
			Env:      &environment.Environment{Name: env},
			Redactor: g.redactor,
			StateDir: stateDir,
			Timeout:  f.timeout,
			Timeline: f.timeline,
			Out:      printer,
		},
		Key:    key,
		Change: change,
	})
	printer.Summary(res.Phases, time.Since(start), g.redactor.Error(err))
	return err
}

func newScaleCommand(g *globals) *cobra.Command {
	f := &manageFlags{}
	var workers, controlPlane int
	cmd := &cobra.Command{
		Use:   "scale ENV --workers N [--control-plane N]",
		Short: "Scale a standalone cluster: management comes back for the time of the change",
		Long: `scale brings a temporary management cluster back for the standalone cluster of ENV (a kind
cluster with the providers that created it, nothing pulled), restores the cluster's objects into
it before any controller runs, sets the replicas of its workers (and of its control plane), waits
until every machine has a Ready node, exports the objects again and deletes the temporary cluster.
Interrupted, the same command run again finishes the change; no machine is replaced.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m := standalone.Change{Command: standalone.CommandScale}
			if cmd.Flags().Changed("workers") {
				if workers < 0 {
					return fmt.Errorf("--workers %d: expected 0 or more", workers)
				}
				m.Workers = &workers
			}
			if cmd.Flags().Changed("control-plane") {
				if controlPlane < 1 || controlPlane%2 == 0 {
					return fmt.Errorf("--control-plane %d: expected an odd number of machines (1, 3, 5, ...): etcd keeps a quorum only with a majority of an odd count", controlPlane)
				}
				m.ControlPlane = &controlPlane
			}
			if m.Workers == nil && m.ControlPlane == nil {
				return errors.New("scale: give --workers N, --control-plane N or both")
			}
			return g.runManage(cmd, args[0], f, m)
		},
	}
	cmd.Flags().IntVar(&workers, "workers", 0, "the number of worker machines")
	cmd.Flags().IntVar(&controlPlane, "control-plane", 0, "the number of control plane machines (odd)")
	addManageFlags(cmd, f)
	return cmd
}

func newDeleteCommand(g *globals) *cobra.Command {
	f := &manageFlags{}
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete ENV",
		Short: "Delete a standalone cluster, its machines and its state",
		Long: `delete brings a temporary management cluster back for the standalone cluster of ENV, restores
the cluster's objects into it, deletes the Cluster and waits until Cluster API has deleted every
machine, then deletes the temporary cluster and the state. Interrupted, run it again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				file, ok := cmd.InOrStdin().(*os.File)
				if !ok || !term.IsTerminal(int(file.Fd())) {
					return fmt.Errorf("delete %s: deletes the cluster and its machines; confirm with --yes", args[0])
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Delete the standalone cluster of %s, its machines and its state? [y/N] ", args[0])
				answer, _ := bufio.NewReader(file).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					return errors.New("delete: not confirmed")
				}
			}
			return g.runManage(cmd, args[0], f, standalone.Change{Command: standalone.CommandDelete})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	addManageFlags(cmd, f)
	return cmd
}

func newStandaloneCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "standalone",
		Short: "List, export and import the states of standalone clusters",
		Long: `A standalone cluster (bootstrap ENV --standalone) runs with no management cluster: its Cluster
API objects are kept on this machine, in the state directory (mode 0700, files 0600, the Secrets
among them age-encrypted). These commands list them and move them between machines, to back them
up. The age key is never in an export: keep it (the key given with --age-key-file, or
cluster-init's own, see list) as well.`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the standalone clusters of this machine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stateDir, err := stateDir()
			if err != nil {
				return err
			}
			entries, err := standalone.List(stateDir.Standalone())
			if err != nil {
				return err
			}
			return writeStandaloneList(cmd.OutOrStdout(), stateDir, entries)
		},
	}
	var out string
	export := &cobra.Command{
		Use:   "export ENV -o FILE",
		Short: "Write the state of a standalone cluster to a file (gzipped tar, 0600; its secrets stay encrypted)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("export: -o FILE is required")
			}
			stateDir, err := stateDir()
			if err != nil {
				return err
			}
			d, err := standalone.DirOf(stateDir.Standalone(), g.standaloneEnv(stateDir, args[0]))
			if err != nil {
				return err
			}
			st, n, err := standalone.Export(d, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported the state of standalone cluster %s (%d files) to %s; its secrets are encrypted to %s: keep that key too, it is not in the file\n", termtext.Line(st.Cluster), n, out, termtext.Line(st.Recipient))
			return nil
		},
	}
	export.Flags().StringVarP(&out, "output", "o", "", "the file to write")
	imp := &cobra.Command{
		Use:   "import FILE",
		Short: "Make an exported state the state of its standalone cluster on this machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stateDir, err := stateDir()
			if err != nil {
				return err
			}
			key, err := g.standaloneKey(false)
			if err != nil {
				return err
			}
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			defer f.Close()
			d, st, err := standalone.Import(stateDir.Standalone(), f, key)
			if err != nil {
				return fmt.Errorf("import %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported standalone cluster %s of environment %s into %s\n", termtext.Line(st.Cluster), termtext.Line(st.Environment), termtext.Line(d.Path))
			return nil
		},
	}
	cmd.AddCommand(list, export, imp)
	return cmd
}

// writeStandaloneList prints the states as a table; a state is a file (an imported one was
// written elsewhere), each of its values escaped in its cell.
func writeStandaloneList(w io.Writer, stateDir statedir.Dir, entries []standalone.Entry) error {
	if len(entries) == 0 {
		fmt.Fprintf(w, "no standalone clusters (states in %s)\n", stateDir.Standalone())
		return nil
	}
	kind := kindcluster.New(stateDir.KindClusters(), func(string) {})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENVIRONMENT\tCLUSTER\tPROVIDERS\tKUBERNETES\tCONTROL PLANE\tWORKERS\tUPDATED\tSTATE")
	for _, e := range entries {
		if e.Err != nil {
			fmt.Fprintf(tw, "%s\t\t\t\t\t\t\tunreadable: %s\n", termtext.Line(e.Dir.Environment), termtext.Line(e.Err.Error()))
			continue
		}
		st := e.State
		status := "no management running"
		if st.Pending != nil {
			status = fmt.Sprintf("interrupted %s (since %s): run it again", st.Pending.Command, st.Pending.Started.Local().Format(time.DateTime))
		}
		if up, _ := kind.Exists(st.BootstrapCluster.Name); up {
			status += "; temporary management cluster " + st.BootstrapCluster.Name + " running"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", termtext.Line(st.Environment), termtext.Line(st.Cluster), termtext.Line(st.Bootstrap+"-"+st.Infrastructure),
			termtext.Line(st.KubernetesVersion), st.ControlPlane, st.Workers, st.Updated.Local().Format(time.DateTime), termtext.Line(status))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nstates: %s", stateDir.Standalone())
	if own, err := statedir.StandaloneKeyFile(); err == nil {
		fmt.Fprintf(w, "; cluster-init's own age key (used without --age-key-file): %s", own)
	}
	fmt.Fprintln(w)
	return nil
}
