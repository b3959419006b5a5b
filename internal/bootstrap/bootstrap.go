// Package bootstrap is the flow of `bootstrap ENV`: validate the environment, get a bootstrap
// cluster (kind, or an existing one), install Flux, publish the source, apply the environment and
// the cluster-init release, then follow every unit until the management cluster runs. Every phase
// is safe to run again: a second run continues where the first stopped.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/diagnostics"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/values"
)

// Options says what to bootstrap and how.
type Options struct {
	RepoRoot string
	Env      *environment.Environment
	// Overrides are extra values files (--values), after the environment values.
	Overrides   []values.Layer
	KubeVersion string
	// Kubeconfig, when set, is an existing cluster to bootstrap from instead of kind.
	Kubeconfig string
	// Source is oci (push the checkout next to kind) or git (the checkout's commit).
	Source string
	// StateDir keeps the kind clusters' files and the diagnostics bundles.
	StateDir string
	// Timeout bounds the whole run.
	Timeout time.Duration
	// Timeline, when set, is an HTML file the run's timeline is written to.
	Timeline string
	// Until, when set, stops the run after the phase of that name.
	Until string
	// KeepBootstrap keeps the bootstrap cluster after a successful pivot.
	KeepBootstrap bool
	Out           progress.Printer
}

// Result is what a finished (or failed) run saw.
type Result struct {
	Phases    []progress.Span
	Units     progress.Snapshot
	Bootstrap string // kubeconfig path of the bootstrap cluster, if kind
	// Management is the kubeconfig path of the self-managed management cluster.
	Management string
	// Conclusion and Diagnostics are set when the run failed while following the units.
	Conclusion  *progress.Conclusion
	Diagnostics string
}

// flow is the state the phases share, like kind's ActionContext.
type flow struct {
	opts   Options
	out    progress.Printer
	start  time.Time
	values map[string]any

	kind      *kindcluster.Manager
	bootstrap *kube.Cluster
	source    map[string]any
	result    *Result
	// pivotStarted: a previous run's pivot has started; the bootstrap cluster is frozen.
	pivotStarted bool
}

type phase struct {
	name string
	run  func(ctx context.Context) error
}

// Run bootstraps the environment.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	if opts.Kubeconfig != "" {
		// The existing cluster keeps managing the new one: nothing to pivot.
		opts.Overrides = append(opts.Overrides, values.FromMap("(--kubeconfig: no pivot)",
			map[string]any{"units": map[string]any{pivotUnit: map[string]any{"enabled": false}}}))
	}
	f := &flow{opts: opts, out: opts.Out, start: time.Now(), result: &Result{}}
	defer opts.Out.Close()

	phases := []phase{
		{"validate", f.validate},
		{"bootstrap cluster", f.bootstrapCluster},
		{"flux", f.installFlux},
		{"source", f.publishSource},
		{"environment", f.applyEnvironment},
		{"units", f.followUnits},
		{"finish", f.finish},
	}
	return f.run(ctx, phases)
}

// run runs the phases in order, like kind's actions, recording when each ran; it stops after
// opts.Until, or at the first error.
func (f *flow) run(ctx context.Context, phases []phase) (*Result, error) {
	if f.opts.Until != "" && !slices.ContainsFunc(phases, func(p phase) bool { return p.name == f.opts.Until }) {
		return f.result, fmt.Errorf("--until: no phase %q (phases: %s)", f.opts.Until, phaseNames(phases))
	}
	defer f.writeTimeline()
	for _, p := range phases {
		f.out.Phase(p.name)
		start := time.Now()
		err := p.run(ctx)
		f.result.Phases = append(f.result.Phases, progress.Span{Name: p.name, Start: start, End: time.Now()})
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("%s: not finished within --timeout %s: %w", p.name, f.opts.Timeout, err)
			}
			return f.result, err
		}
		if p.name == f.opts.Until {
			f.out.Log("stopping after phase %q (--until); run again without --until to continue", p.name)
			break
		}
	}
	return f.result, nil
}

func phaseNames(phases []phase) string {
	names := make([]string, len(phases))
	for i, p := range phases {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

func (f *flow) writeTimeline() {
	if f.opts.Timeline == "" {
		return
	}
	file, err := os.Create(f.opts.Timeline)
	if err == nil {
		err = progress.WriteTimeline(file, "bootstrap "+f.opts.Env.Name, f.start, f.result.Phases, f.result.Units)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		f.out.Log("could not write the timeline %s: %v", f.opts.Timeline, err)
		return
	}
	f.out.Log("timeline: %s", f.opts.Timeline)
}

// collectDiagnostics writes the diagnostics bundle of the clusters reachable now.
func (f *flow) collectDiagnostics(ctx context.Context, conclusion string, clusters ...*kube.Cluster) string {
	// The run's context may be what expired: collecting gets its own time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	b := diagnostics.New(secretValues(f.opts.Env))
	b.Add("conclusion.txt", []byte(conclusion+"\n"))
	for _, c := range clusters {
		if c == nil {
			continue
		}
		if err := b.AddCluster(ctx, c); err != nil {
			b.Add(c.Name+"/error.txt", []byte(err.Error()))
		}
	}
	path, err := b.Write(filepath.Join(f.opts.StateDir, "diagnostics"), filepath.Base(f.opts.Env.Name))
	if err != nil {
		f.out.Log("could not write the diagnostics bundle: %v", err)
		return ""
	}
	return path
}

// secretValues are the leaf values of the environment's secrets, to keep them out of bundles.
func secretValues(env *environment.Environment) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, x := range t {
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		case string:
			out = append(out, t)
		}
	}
	for _, l := range env.Layers {
		if l.Secret {
			walk(l.Data)
		}
	}
	return out
}

func nestedString(vals map[string]any, fields ...string) string {
	s, _, _ := unstructured.NestedString(vals, fields...)
	return s
}

func nestedInt(vals map[string]any, fields ...string) int {
	v, found, _ := unstructured.NestedFieldNoCopy(vals, fields...)
	if !found {
		return 0
	}
	switch n := v.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	case int:
		return n
	}
	return 0
}
