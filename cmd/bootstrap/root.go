package main

import (
	"io"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/checkout"
	"cluster-init.dev/cluster-init/internal/redact"
	"cluster-init.dev/cluster-init/internal/secrets"
	ws "cluster-init.dev/cluster-init/internal/workspace"
)

// globals are the flags every command shares, and what every command's output passes through.
type globals struct {
	repo       string
	ageKeyFile string
	// redactor hides the secrets of the environment a command opened in all it writes and in
	// its error; stdout is the command's output before redaction (a terminal, or what
	// render --show-secrets writes to).
	redactor *redact.Redactor
	stdout   io.Writer
}

func newRootCommand() *cobra.Command {
	g := &globals{redactor: redact.New()}
	flags := &bootstrapFlags{}
	root := &cobra.Command{
		Use:   "bootstrap ENV",
		Short: "Bootstrap a self-managed Cluster API management cluster with Flux and Helm",
		Long: `bootstrap ENV creates a kind cluster, installs Flux, publishes the checkout, applies the
environment and the cluster-init release, and follows every unit until the management cluster
runs. Running it again continues where it stopped. ENV is a directory of environment-values/ or a
path.

An existing cluster instead of kind:
  --kubeconfig FILE          it creates the environment's cluster and keeps managing it (no pivot):
                             a permanent bootstrap cluster
  --kubeconfig FILE --adopt  it becomes the management cluster itself: Flux, cert-manager and the
                             providers are installed into it and reconciled from the environment's
                             source, workload clusters come from git; no cluster is created, and
                             nothing ever creates, replaces or deletes the adopted one. A cluster
                             that runs Flux, cert-manager or Cluster API installed by someone else
                             is refused unless --take-over.`,
		Args:          cobra.MaximumNArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return g.runBootstrap(cmd, args[0], flags)
		},
	}
	addBootstrapFlags(root, flags)
	addFlowFlags(root, flags)
	root.PersistentFlags().StringVar(&g.repo, "repo", "", "the cluster-init checkout (default: the one containing the current directory)")
	root.PersistentFlags().StringVar(&g.ageKeyFile, "age-key-file", "", "the age key that decrypts the environment's SOPS-encrypted secrets (default: $SOPS_AGE_KEY_FILE, then $SOPS_AGE_KEY); never printed")
	root.AddCommand(
		newRenderCommand(g),
		newValidateCommand(g),
		newDiffCommand(g),
		newUnitsCommand(g),
		newImagesCommand(g),
		newApplyCommand(g),
		newScaleCommand(g),
		newDeleteCommand(g),
		newStandaloneCommand(g),
		newStatusCommand(g),
		newUpgradeCommand(g),
		newKubeconfigCommand(g),
		newCleanupCommand(g),
		newSecretsCommand(g),
		newBackupCommand(g),
		newRestoreCommand(g),
		newCopyValuesCommand(),
		newPivotCommand(),
		newBackupJobCommand(),
		newManagementControllersCommand(),
		newTenantSourcesCommand(),
		newChangeGateCommand(),
		newCLIDocCommand(),
	)
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		g.stdout = cmd.OutOrStdout()
		cmd.SetOut(g.redactor.Writer(g.stdout))
		cmd.SetErr(g.redactor.Writer(cmd.ErrOrStderr()))
	}
	redactErrors(root, g.redactor)
	return root
}

// redactErrors makes every command return its error with the secrets hidden: errors quote
// values (a template's output, a path, an object), which may be credentials.
func redactErrors(c *cobra.Command, r *redact.Redactor) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error { return r.Error(run(cmd, args)) }
	}
	for _, sub := range c.Commands() {
		redactErrors(sub, r)
	}
}

// workspace is what a command works on (internal/workspace).
type workspace = ws.Workspace

// addValuesFlag gives a command the --values flag of bootstrap, so that what it shows or checks
// is what bootstrap would apply with the same files.
func addValuesFlag(cmd *cobra.Command, files *[]string) {
	cmd.Flags().StringArrayVar(files, "values", nil, "extra values file, after the environment's values (repeatable)")
}

// openWithValues opens the environment and reads the --values files, in order.
func (g *globals) openWithValues(envName string, files []string) (*workspace, error) {
	w, err := g.open(envName)
	if err != nil {
		return nil, err
	}
	secretValues, err := w.AddValuesFiles(files)
	g.redactor.Add(secretValues...)
	return w, err
}

// checkoutRoot is the cluster-init checkout the command works in: --repo, else the one
// containing the current directory.
func (g *globals) checkoutRoot() (string, error) {
	start := g.repo
	if start == "" {
		start = "."
	}
	return checkout.Root(start)
}

func (g *globals) open(envName string) (*workspace, error) {
	root, err := g.checkoutRoot()
	if err != nil {
		return nil, err
	}
	key, err := secrets.LoadKey(g.ageKeyFile)
	if err != nil {
		return nil, err
	}
	w, err := ws.Open(root, envName, key)
	if err != nil {
		return nil, err
	}
	g.redactor.Add(w.Env.SecretValues()...)
	return w, nil
}
