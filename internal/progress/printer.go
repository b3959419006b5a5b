package progress

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-runewidth"

	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/termtext"
)

// Printer shows a bootstrap as it happens. Printers only print: the state comes from the flow.
type Printer interface {
	// Phase announces a phase of the flow ("bootstrap cluster", "flux", ...).
	Phase(name string)
	// Log is a message within the current phase.
	Log(format string, args ...any)
	// Waiting says what the current phase waits for.
	Waiting(what string, pending []string)
	// Units shows the state of the units.
	Units(s Snapshot)
	// Close finishes the output (a terminal keeps the last state on screen).
	Close()
	// Summary ends a run: how long each phase took, in total, and the error it ended with.
	Summary(phases []Span, total time.Duration, err error)
}

// Format selects a printer.
type Format string

// The output formats.
const (
	Auto  Format = ""      // terminal when the output is one, else plain
	TTY   Format = "tty"   // redraw in place
	Plain Format = "plain" // timestamped lines
	JSON  Format = "json"  // one JSON event per line
)

// TerminalSize reports the size of the terminal the output goes to, in columns and rows (0 when
// unknown). It is asked before each redraw, so that a resized terminal is followed.
type TerminalSize func() (width, height int)

// New returns a printer writing to w. size is nil when w is not a terminal (Auto prints plain
// lines then).
// redact, if set, hides secrets in a line before the terminal printer fits it to the width (the
// writer redacts again; a secret cut at the edge would no longer match).
func New(w io.Writer, format Format, size TerminalSize, start time.Time, redact func(string) string) (Printer, error) {
	if size == nil {
		size = func() (int, int) { return 0, 0 }
	}
	if redact == nil {
		redact = func(s string) string { return s }
	}
	tty := &ttyPrinter{w: w, start: start, now: time.Now, size: size, redact: redact}
	switch format {
	case Auto:
		if _, h := size(); h > 0 {
			return tty, nil
		}
		return &plainPrinter{w: w, start: start, now: time.Now, last: map[string]string{}}, nil
	case TTY:
		return tty, nil
	case Plain:
		return &plainPrinter{w: w, start: start, now: time.Now, last: map[string]string{}}, nil
	case JSON:
		return &jsonPrinter{w: w, now: time.Now, last: map[string]string{}}, nil
	default:
		return nil, fmt.Errorf("--output: unknown format %q, expected tty, plain or json", format)
	}
}

func dur(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	if d < time.Hour {
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	if d < 24*time.Hour {
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

var symbols = map[readiness.State]string{readiness.Pending: "·", readiness.Reconciling: "◌", readiness.Ready: "✓", readiness.Failed: "✗", readiness.Suspended: "‖"}

// elapsedColumn is how long each unit has been (or was) reconciling while it is watched.
func elapsedColumn(s Snapshot) func(Unit) string {
	return func(u Unit) string {
		if u.Started.IsZero() {
			return ""
		}
		return dur(u.Elapsed(s.At))
	}
}

// sinceColumn is how long each unit has been in its state, from its Kustomization's condition:
// for a single look, which has no history of its own.
func sinceColumn(s Snapshot) func(Unit) string {
	return func(u Unit) string {
		if u.Since.IsZero() || u.Since.After(s.At) {
			return ""
		}
		return dur(s.At.Sub(u.Since))
	}
}

// unitLines renders the unit tree of a snapshot, with column's time for each unit: one aligned
// row per unit, the details of a unit that is not ready under its row. What comes from the
// cluster is escaped here, each field on its row (a tab or a newline in a message would break
// the table).
func unitLines(s Snapshot, column func(Unit) string) []string {
	if s.Graph == nil {
		return []string{"  " + termtext.Line(s.Release)}
	}
	var release []string
	if s.ReleaseFailing {
		release = []string{"  " + termtext.Line(s.Release)}
	}
	byName := map[string]Unit{}
	for _, u := range s.Units {
		byName[u.Name] = u
	}
	tree := s.Graph.Tree()
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 1, ' ', 0)
	for _, l := range tree {
		u := byName[l.Unit.Name]
		detail := u.Message
		if u.State == readiness.Ready {
			detail = ""
		} else if u.Reason != "" && u.State != readiness.Pending {
			detail = u.Reason + ": " + u.Message
		}
		detail = termtext.Line(detail)
		if len(detail) > 110 {
			if r := []rune(detail); len(r) > 110 {
				detail = string(r[:107]) + "..."
			}
		}
		name := l.Prefix + termtext.Line(u.Name)
		if s.Revisions {
			fmt.Fprintf(tw, "  %s %s\t%s\t%6s\t %s\t %s\n", symbols[u.State], name, u.State, column(u), termtext.Line(orDash(u.Revision.String())), detail)
			continue
		}
		fmt.Fprintf(tw, "  %s %s\t%s\t%6s\t %s\n", symbols[u.State], name, u.State, column(u), detail)
	}
	_ = tw.Flush()
	rows := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	out := release
	for i, l := range tree {
		out = append(out, strings.TrimRight(rows[i], " "))
		if u := byName[l.Unit.Name]; u.State != readiness.Ready {
			indent := strings.Repeat(" ", len([]rune(l.Prefix))+4)
			for _, d := range u.Details {
				out = append(out, "  "+indent+termtext.Line(d))
			}
		}
	}
	return out
}

// ttyPrinter keeps a region (the unit tree, or what a phase waits for) at the bottom of the
// terminal and redraws it in place: it moves the cursor up by the lines it drew, so every line it
// draws must take exactly one row. Lines are cut to the width and the region to the height the
// terminal has at each redraw; the messages above the region scroll and may wrap.
type ttyPrinter struct {
	mu     sync.Mutex
	w      io.Writer
	start  time.Time
	now    func() time.Time
	size   TerminalSize
	redact func(string) string
	phase  string
	// region is what to show; drawn is how many rows the last draw took.
	region []string
	drawn  int
}

// Fallbacks when the terminal does not say its size.
const (
	defaultWidth  = 80
	defaultHeight = 24
)

func (p *ttyPrinter) clear() {
	if p.drawn > 0 {
		fmt.Fprintf(p.w, "\x1b[%dA\x1b[J", p.drawn)
	}
	p.drawn = 0
}

func (p *ttyPrinter) draw() {
	lines := make([]string, len(p.region))
	for i, l := range p.region {
		lines[i] = p.redact(l)
	}
	lines = fitTerminal(lines, p.size)
	for _, l := range lines {
		fmt.Fprintln(p.w, l)
	}
	p.drawn = len(lines)
}

// fitTerminal cuts each line to one row less than the width (a line that fills the last column
// makes some terminals wrap) and keeps the region within the height.
func fitTerminal(lines []string, size TerminalSize) []string {
	width, height := size()
	if width <= 0 {
		width = defaultWidth
	}
	if height <= 0 {
		height = defaultHeight
	}
	maxLines := max(height-1, 2)
	if len(lines) > maxLines {
		hidden := len(lines) - maxLines + 1
		lines = append(lines[:maxLines-1:maxLines-1], fmt.Sprintf("  … %d more lines (a taller terminal shows them)", hidden))
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		// Escaped, a line takes one row whatever the cluster wrote into it.
		out[i] = runewidth.Truncate(termtext.Line(l), width-1, "…")
	}
	return out
}

// print writes a message above the region; the lines of a multi-line message are indented under
// its first.
func (p *ttyPrinter) print(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintln(p.w, termtext.Block(line, "    "))
	p.draw()
}

func (p *ttyPrinter) Phase(name string) {
	p.phase = name
	p.print(fmt.Sprintf("▶ %s  (%s)", name, dur(p.now().Sub(p.start))))
}

func (p *ttyPrinter) Log(format string, args ...any) { p.print("  " + fmt.Sprintf(format, args...)) }

func (p *ttyPrinter) Waiting(what string, pending []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	p.region = []string{fmt.Sprintf("  waiting for %s (%s)", what, dur(p.now().Sub(p.start)))}
	for _, x := range pending {
		p.region = append(p.region, "    · "+x)
	}
	p.draw()
}

func (p *ttyPrinter) Units(s Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	ready, total := s.Counts()
	p.region = append([]string{fmt.Sprintf("  units: %d/%d ready, %s since start", ready, total, dur(s.At.Sub(p.start)))}, unitLines(s, elapsedColumn(s))...)
	p.draw()
}

func (p *ttyPrinter) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.region, p.drawn = nil, 0 // leave the last state on screen
}

type plainPrinter struct {
	w     io.Writer
	start time.Time
	now   func() time.Time
	last  map[string]string
	// lastSummary is when the pending units were last listed, for long waits.
	lastSummary time.Time
}

// line prints a timestamped line; the lines of a multi-line message (a condition's, an error's)
// are indented under it, past the timestamp.
func (p *plainPrinter) line(format string, args ...any) {
	now := p.now()
	fmt.Fprintf(p.w, "%s +%-6s %s\n", now.Format("15:04:05"), dur(now.Sub(p.start)), termtext.Block(fmt.Sprintf(format, args...), plainIndent))
}

// plainIndent starts the lines that continue a plain line: past its timestamp and elapsed time
// (17 columns), and deeper than the details of a unit (6 more), the deepest lines of its own.
const plainIndent = "                         "

func (p *plainPrinter) Phase(name string) { p.line("▶ %s", name) }

func (p *plainPrinter) Log(format string, args ...any) { p.line("  "+format, args...) }

func (p *plainPrinter) Waiting(what string, pending []string) {
	if !changed(p.last, "waiting", what+strings.Join(pending, ",")) && p.now().Sub(p.lastSummary) < time.Minute {
		return
	}
	p.lastSummary = p.now()
	p.line("  waiting for %s: %s", what, strings.Join(pending, "; "))
}

func (p *plainPrinter) Units(s Snapshot) {
	if releaseNews(p.last, s) {
		p.line("  %s", s.Release)
	}
	if s.Graph == nil {
		return
	}
	for _, u := range s.Units {
		if !changed(p.last, u.Name, changeKey(u)) {
			continue
		}
		msg := fmt.Sprintf("  unit %s: %s", u.Name, u.State)
		if e := u.Elapsed(s.At); e > 0 && u.State != readiness.Pending {
			msg += " after " + dur(e)
		}
		if rev := u.Revision.String(); rev != "" {
			msg += " (commit " + rev + ")"
		}
		if u.State != readiness.Ready && u.Message != "" {
			msg += " — " + strings.TrimPrefix(u.Reason+": "+u.Message, ": ")
		}
		p.line("%s", msg)
		if u.State != readiness.Ready {
			for _, d := range u.Details {
				p.line("      %s", d)
			}
		}
	}
	if p.now().Sub(p.lastSummary) >= time.Minute {
		p.lastSummary = p.now()
		ready, total := s.Counts()
		var running []string
		for _, u := range s.Units {
			if u.State == readiness.Reconciling || u.State == readiness.Failed {
				running = append(running, fmt.Sprintf("%s (%s)", u.Name, dur(u.Elapsed(s.At))))
			}
		}
		p.line("  %d/%d units ready; reconciling: %s", ready, total, strings.Join(running, ", "))
	}
}

func (p *plainPrinter) Close() {}

// releaseNews says whether a line-oriented printer shows the release's state: before the units
// exist, while it fails, and once when it no longer does.
func releaseNews(last map[string]string, s Snapshot) bool {
	switch {
	case s.Graph == nil:
		return changed(last, "release", s.Release)
	case s.ReleaseFailing:
		last["release-failing"] = "yes"
		return changed(last, "release", s.Release)
	case last["release-failing"] == "yes":
		delete(last, "release-failing")
		return changed(last, "release", s.Release)
	}
	return false
}

// changed records value under key and tells whether it differs from the last one.
func changed(last map[string]string, key, value string) bool {
	if last[key] == value {
		return false
	}
	last[key] = value
	return true
}

// changeKey is what must change for a line-oriented printer to print a unit again: its state and
// reason, and while it is not ready, its details without their free-text messages (Cluster API
// rewrites those at every reconcile).
func changeKey(u Unit) string {
	key := string(u.State) + "|" + u.Reason + "|" + u.Revision.String()
	if u.State == readiness.Ready {
		return key
	}
	key += "|" + u.Message
	for _, d := range u.Details {
		if i := strings.Index(d, ";"); i >= 0 {
			d = d[:i] // "Machine x (worker): Running; <message>" -> "Machine x (worker): Running"
		}
		key += "|" + d
	}
	return key
}

// jsonPrinter writes one JSON event per line, the data as the cluster holds it, escaped for JSON
// and for a terminal the stream may be shown on (termtext.WriteJSON).
type jsonPrinter struct {
	w    io.Writer
	now  func() time.Time
	last map[string]string
}

type event struct {
	Time    time.Time `json:"time"`
	Event   string    `json:"event"`
	Phase   string    `json:"phase,omitempty"`
	Message string    `json:"message,omitempty"`
	Pending []string  `json:"pending,omitempty"`
	Unit    *Unit     `json:"unit,omitempty"`
}

func (p *jsonPrinter) emit(e event) {
	e.Time = p.now()
	_ = termtext.WriteJSON(p.w, e, "")
}

func (p *jsonPrinter) Phase(name string) { p.emit(event{Event: "phase", Phase: name}) }
func (p *jsonPrinter) Log(format string, args ...any) {
	p.emit(event{Event: "log", Message: fmt.Sprintf(format, args...)})
}
func (p *jsonPrinter) Waiting(what string, pending []string) {
	if changed(p.last, "waiting", what+strings.Join(pending, ",")) {
		p.emit(event{Event: "waiting", Message: what, Pending: pending})
	}
}
func (p *jsonPrinter) Units(s Snapshot) {
	if releaseNews(p.last, s) {
		p.emit(event{Event: "release", Message: s.Release})
	}
	if s.Graph == nil {
		return
	}
	for _, u := range s.Units {
		if changed(p.last, u.Name, changeKey(u)) {
			p.emit(event{Event: "unit", Unit: &u})
		}
	}
}
func (p *jsonPrinter) Close() {}

// phaseTime is a phase's duration in a JSON summary.
type phaseTime struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Summary is the last event of the stream: the phases, the total and the error, if any.
func (p *jsonPrinter) Summary(phases []Span, total time.Duration, err error) {
	e := struct {
		Time         time.Time   `json:"time"`
		Event        string      `json:"event"`
		Phases       []phaseTime `json:"phases"`
		TotalSeconds float64     `json:"total_seconds"`
		Error        string      `json:"error,omitempty"`
	}{Time: p.now(), Event: "summary", TotalSeconds: total.Round(time.Millisecond).Seconds()}
	for _, ph := range phases {
		e.Phases = append(e.Phases, phaseTime{ph.Name, ph.End.Sub(ph.Start).Round(time.Millisecond).Seconds()})
	}
	if err != nil {
		e.Error = err.Error()
	}
	_ = termtext.WriteJSON(p.w, e, "")
}

// writeSummary prints the phases as a table (the error is the caller's to print).
func writeSummary(w io.Writer, phases []Span, total time.Duration) {
	if len(phases) == 0 {
		return
	}
	fmt.Fprintln(w, "\nphases:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, ph := range phases {
		fmt.Fprintf(tw, "  %s\t%s\n", ph.Name, ph.End.Sub(ph.Start).Round(time.Second))
	}
	fmt.Fprintf(tw, "  %s\t%s\n", "total", total.Round(time.Second))
	_ = tw.Flush()
}

func (p *plainPrinter) Summary(phases []Span, total time.Duration, _ error) {
	writeSummary(p.w, phases, total)
}

func (p *ttyPrinter) Summary(phases []Span, total time.Duration, _ error) {
	writeSummary(p.w, phases, total)
}

// WriteStatus prints a snapshot once: the state of the release, or the unit tree with how long
// each unit has been in its state and, if the snapshot has them, the commit each runs.
func WriteStatus(w io.Writer, title string, s Snapshot) {
	ready, total := s.Counts()
	legend := "time: in this state"
	if s.Revisions {
		legend += "; the commit applied, and the one fetched when it is behind"
	}
	fmt.Fprintf(w, "%s: %d/%d units ready (%s)\n", termtext.Line(title), ready, total, legend)
	for _, l := range unitLines(s, sinceColumn(s)) {
		fmt.Fprintln(w, l)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
