package progress

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"

	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/termtext"
	"cluster-init.dev/cluster-init/internal/termtext/termtexttest"
)

// hostileSnapshot is a bootstrap whose failed unit carries the hostile message where the cluster
// puts text: its Kustomization's condition, the release's line, the machines' lines under it,
// the chart's help for it.
func hostileSnapshot(t0 time.Time) Snapshot {
	hostile := termtexttest.Hostile()
	g := graph()
	g.Units["capi"].Help = hostile
	obs := Observed{Units: readiness.Units{Graph: g, Kustomizations: map[string]*kustomizev1.Kustomization{
		"cert-manager": ks("cert-manager", 1, 1, "True", "ReconciliationSucceeded", "ok"),
		"capi":         ks("capi", 1, 0, "False", "ReconciliationFailed", hostile),
	}}, Release: "release cluster-init: UpgradeFailed: " + hostile, ReleaseFailing: true,
		Details: map[string][]string{"capi": {"Machine m1 (worker): Provisioning; " + hostile}}}
	tr := NewTracker(t0)
	tr.Update(obs, t0)
	return tr.Update(obs, t0.Add(6*time.Minute)) // past capi's 5m: failed
}

// ownSequences are the tty printer's own escape sequences: up by the lines it drew, erase below.
var ownSequences = regexp.MustCompile(`\x1b\[\d+A\x1b\[J`)

// Every printer of the live view shows what the cluster wrote escaped, whatever call carries it.
func TestPrintersEscapeWhatTheClusterWrites(t *testing.T) {
	hostile := termtexttest.Hostile()
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	s := hostileSnapshot(t0)
	if u, _ := s.Unit("capi"); u.State != readiness.Failed || u.Message != hostile {
		t.Fatalf("the snapshot does not carry the message as the cluster wrote it: %+v", u)
	}
	for _, f := range []Format{Plain, TTY, JSON} {
		var out bytes.Buffer
		p, err := New(&out, f, func() (int, int) { return 2000, 100 }, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.Phase("units")
		p.Log("apply the environment: %v", errors.New(hostile))
		p.Waiting("the cluster to answer", []string{hostile})
		p.Units(s)
		p.Close()
		p.Summary([]Span{{Name: "units", Start: t0, End: s.At}}, time.Minute, errors.New(hostile))
		switch f {
		case TTY:
			termtexttest.Check(t, "tty", ownSequences.ReplaceAllString(out.String(), ""))
		case Plain:
			termtexttest.Check(t, "plain", out.String())
		case JSON:
			checkJSONEvents(t, out.String(), hostile)
		}
	}

	var status bytes.Buffer
	WriteStatus(&status, "env, given cluster ("+hostile+")", s)
	termtexttest.Check(t, "status", status.String())

	termtexttest.Check(t, "conclusion", Conclude(s).String())
}

// checkJSONEvents checks that every event is a line of valid JSON with no control character raw,
// and that the events carry the cluster's text as it is.
func checkJSONEvents(t *testing.T, out, hostile string) {
	t.Helper()
	messages := map[string]int{}
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if safe := termtext.Line(line); safe != line {
			t.Errorf("json: event %d holds control characters raw: %s", i+1, safe)
		}
		var e struct {
			Event   string   `json:"event"`
			Message string   `json:"message"`
			Pending []string `json:"pending"`
			Error   string   `json:"error"`
			Unit    *Unit    `json:"unit"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Errorf("json: event %d: %v: %s", i+1, err, line)
			continue
		}
		for _, text := range append([]string{e.Message, e.Error}, e.Pending...) {
			if strings.Contains(text, hostile) {
				messages[e.Event]++
			}
		}
		if e.Unit != nil && e.Unit.Message == hostile {
			messages["unit"]++
		}
	}
	for _, event := range []string{"log", "waiting", "release", "unit", "summary"} {
		if messages[event] == 0 {
			t.Errorf("json: no %s event carries the message as the cluster wrote it:\n%s", event, out)
		}
	}
	if !strings.Contains(out, `\u001b[2J`) || !strings.Contains(out, `\u009b31m`) || !strings.Contains(out, `\u202e`) {
		t.Errorf("json: the escapes of the attacks are not there:\n%s", out)
	}
}

// A tenant's directory, release and units, as status shows them.
func TestWorkloadClustersEscapeWhatTheTenantsWrite(t *testing.T) {
	hostile := termtexttest.Hostile()
	var out bytes.Buffer
	WriteWorkloadClusters(&out, []Tenant{{Namespace: "tenant-a", Directory: "clusters/a: ReconciliationFailed: " + hostile,
		Clusters: []WorkloadCluster{{Name: "c1", Release: "release: InstallFailed: " + hostile,
			Machines: machines.View{Found: true, Name: "c1", Phase: "Provisioning", Unknown: hostile},
			Units: readiness.Units{Graph: graph(), Kustomizations: map[string]*kustomizev1.Kustomization{
				"cert-manager": ks("cert-manager", 1, 0, "False", "ReconciliationFailed", hostile),
			}}}}}})
	termtexttest.Check(t, "workload clusters", out.String())
}

// The timeline is a file shown in a browser, and may be shown on a terminal: what it quotes is
// escaped for HTML and for the terminal, and the SVG stays XML.
func TestTimelineEscapesWhatItQuotes(t *testing.T) {
	hostile := termtexttest.Hostile()
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	s := hostileSnapshot(t0)
	phases := []Span{{Name: hostile, Start: t0, End: t0.Add(time.Minute)}}
	var html, svg bytes.Buffer
	if err := WriteTimeline(&html, "bootstrap "+hostile, t0, phases, s); err != nil {
		t.Fatal(err)
	}
	termtexttest.Check(t, "timeline", html.String())
	if err := WriteTimelineSVG(&svg, "bootstrap "+hostile, t0, phases, s); err != nil {
		t.Fatal(err)
	}
	termtexttest.Check(t, "timeline svg", svg.String())
	if err := xml.Unmarshal(svg.Bytes(), new(struct{})); err != nil {
		t.Errorf("the SVG timeline is not well-formed XML: %v", err)
	}
}
