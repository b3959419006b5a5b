package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/ssa"

	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/standalone"
)

// session is what every phase of one command shares and none changes: the options every verb
// has, the source asked for, the output, the renderer of the checkout (one snapshot, every build
// kept) and the result being recorded. What only some verbs have is given to their phases.
type session struct {
	opts     Common
	source   string // --source: oci, git, or "" for the environment's own
	out      progress.Printer
	renderer *render.Renderer
	start    time.Time
	result   *Result

	// bg is the work the command started in the background (pre-pulling images): stopped before
	// the clusters it works in can go, and at the latest when the command ends.
	bg struct {
		sync.Mutex
		stops []func()
	}
}

// newSession starts a command. Without a checkout (RepoRoot empty: a standalone cluster's state
// is all Manage reads) there is no renderer.
func newSession(opts Common, source string) (*session, error) {
	s := &session{opts: opts, source: source, out: opts.Out, start: time.Now(), result: &Result{}}
	if opts.RepoRoot != "" {
		r, err := render.New(opts.RepoRoot, opts.KubeVersion, opts.BuildCache)
		if err != nil {
			return nil, err
		}
		s.renderer = r
	}
	return s, nil
}

// newSessionBesideStandalone starts a command that makes the environment's management cluster:
// refused while the environment has a standalone cluster (its state says so).
func newSessionBesideStandalone(opts Common, source string) (*session, error) {
	if err := standalone.RefuseCreated(opts.StateDir.Standalone(), opts.Env.Name); err != nil {
		return nil, err
	}
	return newSession(opts, source)
}

func (s *session) close() {
	s.stopBackground()
	s.out.Close()
	if s.renderer != nil {
		_ = s.renderer.Close()
	}
}

// background runs f in a goroutine until it returns or stopBackground cancels its context.
func (s *session) background(ctx context.Context, f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	s.bg.Lock()
	defer s.bg.Unlock()
	s.bg.stops = append(s.bg.stops, func() { cancel(); <-done })
}

// stopBackground stops what background started and waits for it.
func (s *session) stopBackground() {
	s.bg.Lock()
	stops := s.bg.stops
	s.bg.stops = nil
	s.bg.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// renderOptions are the options of a render of the environment in a context.
func (s *session) renderOptions(context string, source map[string]any) render.Options {
	return render.Options{Env: s.opts.Env, Context: context, Overrides: s.opts.Overrides, Source: source}
}

type phase struct {
	name string
	run  func(ctx context.Context) error
}

// run runs the phases in order, recording when each ran; it stops after the phase named until
// (--until; "" for none), or at the first error.
func (s *session) run(ctx context.Context, until string, phases []phase) (*Result, error) {
	if until != "" && !slices.ContainsFunc(phases, func(p phase) bool { return p.name == until }) {
		var names []string
		for _, p := range phases {
			names = append(names, p.name)
		}
		return s.result, fmt.Errorf("--until: no phase %q (phases: %s)", until, strings.Join(names, ", "))
	}
	if s.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
	}
	defer s.writeTimeline()
	for _, p := range phases {
		s.out.Phase(p.name)
		start := time.Now()
		err := p.run(ctx)
		s.result.Phases = append(s.result.Phases, progress.Span{Name: p.name, Start: start, End: time.Now()})
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("%s: not finished within --timeout %s: %w", p.name, s.opts.Timeout, err)
			}
			return s.result, err
		}
		if p.name == until {
			s.out.Log("stopping after phase %q (--until); run again without --until to continue", p.name)
			break
		}
	}
	return s.result, nil
}

func (s *session) writeTimeline() {
	if s.opts.Timeline == "" {
		return
	}
	file, err := os.Create(s.opts.Timeline)
	if err == nil {
		write := progress.WriteTimeline
		if strings.HasSuffix(s.opts.Timeline, ".svg") {
			write = progress.WriteTimelineSVG
		}
		err = write(file, "bootstrap "+s.opts.Env.Name, s.start, s.result.Phases, s.result.Units)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		s.out.Log("could not write the timeline %s: %v", s.opts.Timeline, err)
		return
	}
	s.out.Log("timeline: %s", s.opts.Timeline)
}

func (s *session) logChanges(cs *ssa.ChangeSet) {
	counts := map[ssa.Action]int{}
	for _, e := range cs.Entries {
		counts[e.Action]++
	}
	s.out.Log("applied %d objects: %d created, %d configured, %d unchanged", len(cs.Entries),
		counts[ssa.CreatedAction], counts[ssa.ConfiguredAction], counts[ssa.UnchangedAction])
}
