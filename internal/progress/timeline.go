package progress

import (
	"fmt"
	"html/template"
	"io"
	"time"

	"cluster-init.dev/cluster-init/internal/termtext"
	"cluster-init.dev/cluster-init/internal/units"
)

// Span is a phase of the flow and when it ran.
type Span struct {
	Name       string
	Start, End time.Time
}

// CriticalPath is the chain of dependencies that took longest, weighted by how long each unit
// was seen reconciling: the graph's critical path with measured durations.
func (s Snapshot) CriticalPath() []string {
	if s.Graph == nil {
		return nil
	}
	elapsed := map[string]float64{}
	for _, u := range s.Units {
		elapsed[u.Name] = u.Elapsed(s.At).Seconds()
	}
	return s.Graph.CriticalPath(func(u *units.Unit) float64 { return elapsed[u.Name] })
}

type bar struct {
	Label, Class, Title string
	X, W, Y             float64
	Critical            bool
}

// The picture is one SVG, with its own style so that it stands alone (a README can show it); the
// HTML page puts it under a heading.
var timelineTemplate = template.Must(template.Must(template.New("svg").Parse(`<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}">
<style>
.phase { fill: #9aa5b1; } .ready { fill: #3b9b59; } .reconciling { fill: #d9a520; }
.failed { fill: #c8372d; } .pending { fill: #c4c9cf; } .suspended { fill: #7b61a8; }
.critical { stroke: #111; stroke-width: 2.5; }
text { font: 12px sans-serif; } .axis { stroke: #ddd; } .heading { font-weight: bold; }
</style>
<rect width="100%" height="100%" fill="#fff"/>
{{if .Heading}}<text class="heading" x="4" y="16">{{.Title}}: {{.Total}}</text>
<text x="4" y="34">critical path (outlined): {{range $i, $n := .Critical}}{{if $i}} → {{end}}{{$n}}{{end}}</text>
{{end}}{{range .Ticks}}<line class="axis" x1="{{.X}}" y1="{{$.Top}}" x2="{{.X}}" y2="{{$.Height}}"/><text x="{{.X}}" y="{{$.Height}}" dy="-2">{{.Label}}</text>
{{end}}{{range .Bars}}<text x="4" y="{{.Y}}" dy="13">{{.Label}}</text>
<rect class="{{.Class}}{{if .Critical}} critical{{end}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="16"><title>{{.Title}}</title></rect>
{{end}}</svg>`)).New("html").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body { font: 13px sans-serif; margin: 20px; }</style></head><body>
<h2>{{.Title}}</h2>
<p>Total {{.Total}}. Critical path (outlined): {{range $i, $n := .Critical}}{{if $i}} → {{end}}{{$n}}{{end}}.</p>
{{template "svg" .}}
</body></html>
`))

// WriteTimeline writes an HTML page with one bar per phase and per unit on a time axis, the
// critical path outlined. html/template escapes the text for HTML; the control characters it
// leaves (which XML forbids, and a terminal showing the file acts on) are escaped here.
func WriteTimeline(w io.Writer, title string, start time.Time, phases []Span, s Snapshot) error {
	return writeTimeline(w, "html", title, start, phases, s)
}

// WriteTimelineSVG writes the same picture as a standalone SVG, its title and critical path in it.
func WriteTimelineSVG(w io.Writer, title string, start time.Time, phases []Span, s Snapshot) error {
	return writeTimeline(w, "svg", title, start, phases, s)
}

func writeTimeline(w io.Writer, format, title string, start time.Time, phases []Span, s Snapshot) error {
	end := s.At
	for _, p := range phases {
		if p.End.After(end) {
			end = p.End
		}
	}
	total := end.Sub(start)
	if total <= 0 {
		total = time.Second
	}
	const labelWidth, plotWidth, rowHeight = 240.0, 900.0, 22.0
	x := func(t time.Time) float64 { return labelWidth + plotWidth*t.Sub(start).Seconds()/total.Seconds() }
	critical := map[string]bool{}
	cp := s.CriticalPath()
	for _, n := range cp {
		critical[n] = true
	}
	shownPath := make([]string, len(cp))
	for i, n := range cp {
		shownPath[i] = termtext.Line(n)
	}

	top := 0.0
	if format == "svg" {
		top = 44 // the heading
	}
	var bars []bar
	y := top + 10
	for _, p := range phases {
		bars = append(bars, bar{Label: termtext.Line("phase: " + p.Name), Class: "phase", X: x(p.Start), W: max(1, x(p.End)-x(p.Start)), Y: y,
			Title: termtext.Line(fmt.Sprintf("%s: %s", p.Name, dur(p.End.Sub(p.Start))))})
		y += rowHeight
	}
	for _, u := range s.Units {
		from, to := u.Started, u.Finished
		if from.IsZero() {
			from = s.At
		}
		if to.IsZero() {
			to = s.At
		}
		bars = append(bars, bar{Label: termtext.Line(u.Name), Class: string(u.State), X: x(from), W: max(1, x(to)-x(from)), Y: y, Critical: critical[u.Name],
			Title: termtext.Line(fmt.Sprintf("%s: %s, %s", u.Name, u.State, dur(u.Elapsed(s.At))))})
		y += rowHeight
	}
	type tick struct {
		X     float64
		Label string
	}
	var ticks []tick
	step := time.Minute
	if total > 20*time.Minute {
		step = 5 * time.Minute
	}
	for t := time.Duration(0); t <= total; t += step {
		ticks = append(ticks, tick{X: x(start.Add(t)), Label: dur(t)})
	}
	return timelineTemplate.ExecuteTemplate(w, format, map[string]any{
		"Title": termtext.Line(title), "Total": dur(total), "Critical": shownPath, "Bars": bars, "Ticks": ticks,
		"Width": labelWidth + plotWidth + 40, "Height": y + 20, "Top": top, "Heading": format == "svg",
	})
}
