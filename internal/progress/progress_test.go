package progress

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/units"
)

func graph() *units.Graph {
	u := func(name, timeout string, deps ...string) *units.Unit {
		return &units.Unit{Name: name, Enabled: true, DependsOn: deps, Timeout: timeout}
	}
	return &units.Graph{Context: "bootstrap", Order: []string{"cert-manager", "capi", "capd", "cluster", "cni"}, Units: map[string]*units.Unit{
		"cert-manager": u("cert-manager", "5m"), "capi": u("capi", "5m", "cert-manager"), "capd": u("capd", "5m", "capi"),
		"cluster": u("cluster", "30m", "capi", "capd"), "cni": u("cni", "10m", "cluster"),
	}}
}

// ks is a unit's Kustomization as kustomize-controller reports it: the Ready condition of the
// generation it handled, status.observedGeneration the last one that succeeded.
func ks(name string, gen, observed int64, status metav1.ConditionStatus, reason, msg string) *kustomizev1.Kustomization {
	k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen}}
	k.Status.ObservedGeneration = observed
	k.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}}
	return k
}

// olderCondition is k with its Ready condition of the generation before: Flux has not tried the
// current one yet.
func olderCondition(k *kustomizev1.Kustomization) *kustomizev1.Kustomization {
	k.Status.Conditions[0].ObservedGeneration = k.Generation - 1
	return k
}

func TestUnitsGoThroughTheirStatesAndTheBlockingUnitIsNamed(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tr := NewTracker(t0)
	obs := Observed{Units: readiness.Units{Graph: graph(), Kustomizations: map[string]*kustomizev1.Kustomization{
		"cert-manager": ks("cert-manager", 1, 1, "Unknown", "Progressing", "Reconciliation in progress"),
		"capi":         ks("capi", 1, 1, "False", "DependencyNotReady", "Dependencies do not meet ready condition"),
	}}, Details: map[string][]string{"cluster": {"Cluster management: Provisioning"}}}

	s := tr.Update(obs, t0.Add(10*time.Second))
	want := map[string]readiness.State{"cert-manager": readiness.Reconciling, "capi": readiness.Pending, "capd": readiness.Pending, "cluster": readiness.Pending, "cni": readiness.Pending}
	for _, u := range s.Units {
		if u.State != want[u.Name] {
			t.Errorf("%s: %s, want %s", u.Name, u.State, want[u.Name])
		}
	}
	if u, _ := s.Unit("capi"); u.Message != "waiting for cert-manager" || !u.Started.IsZero() {
		t.Errorf("capi: %+v", u)
	}

	obs.Kustomizations["cert-manager"] = ks("cert-manager", 1, 1, "True", "ReconciliationSucceeded", "Applied revision")
	obs.Kustomizations["capi"] = ks("capi", 1, 1, "True", "ReconciliationSucceeded", "Applied revision")
	obs.Kustomizations["capd"] = ks("capd", 1, 1, "Unknown", "Progressing", "Reconciliation in progress")
	s = tr.Update(obs, t0.Add(70*time.Second))
	obs.Kustomizations["capd"] = ks("capd", 1, 1, "True", "ReconciliationSucceeded", "Applied revision")
	obs.Kustomizations["cluster"] = ks("cluster", 1, 1, "False", "HealthCheckFailed", "timeout waiting for Cluster")
	s = tr.Update(obs, t0.Add(100*time.Second))
	if u, _ := s.Unit("cert-manager"); u.State != readiness.Ready || u.Elapsed(s.At) != 60*time.Second {
		t.Errorf("cert-manager: %s after %s", u.State, u.Elapsed(s.At))
	}
	// Failing but within its 30m timeout: Flux will retry.
	if u, _ := s.Unit("cluster"); u.State != readiness.Reconciling {
		t.Errorf("cluster within its timeout: %s", u.State)
	}
	obs.Graph.Units["cluster"].Help = "RKE2 machines download RKE2 at first boot"
	s = tr.Update(obs, t0.Add(31*time.Minute+40*time.Second))
	c := Conclude(s)
	if len(c.Blocking) != 1 || c.Blocking[0].Name != "cluster" || c.Blocking[0].State != readiness.Failed {
		t.Fatalf("conclusion: %+v", c)
	}
	if !slices.Equal(c.Waiting["cluster"], []string{"cni"}) {
		t.Errorf("waiting on cluster: %v", c.Waiting["cluster"])
	}
	text := c.String()
	for _, w := range []string{"unit cluster failed after 30m0s: HealthCheckFailed: timeout waiting for Cluster", "waiting on it: cni", "Cluster management: Provisioning",
		"what to look at: RKE2 machines download RKE2 at first boot"} {
		if !strings.Contains(text, w) {
			t.Errorf("conclusion lacks %q:\n%s", w, text)
		}
	}
	if cp := s.CriticalPath(); !slices.Equal(cp, []string{"cert-manager", "capi", "capd", "cluster"}) {
		t.Errorf("critical path %v", cp)
	}
}

// A new generation is not ready yet, and what Flux said of the one before is neither ready nor a
// failure of this one, however long Flux takes to try it.
func TestANewGenerationIsNotReadyYet(t *testing.T) {
	t0 := time.Now()
	tr := NewTracker(t0)
	obs := Observed{Units: readiness.Units{Graph: graph(), Kustomizations: map[string]*kustomizev1.Kustomization{
		"cert-manager": olderCondition(ks("cert-manager", 2, 1, "True", "ReconciliationSucceeded", "old revision")),
		"capi":         olderCondition(ks("capi", 2, 0, "False", "HealthCheckFailed", "timeout waiting for Deployment")),
	}}}
	for _, at := range []time.Time{t0, t0.Add(time.Hour)} {
		s := tr.Update(obs, at)
		for _, name := range []string{"cert-manager", "capi"} {
			if u, _ := s.Unit(name); u.State != readiness.Reconciling {
				t.Errorf("%s after %s, its Ready condition of the generation before: %s", name, at.Sub(t0), u.State)
			}
		}
	}
}

// Flux retries a unit whose last attempt failed: the bootstrap waits, until the unit's timeout.
func TestAFailingUnitFailsOnlyOnceItsTimeoutIsSpent(t *testing.T) {
	t0 := time.Now()
	tr := NewTracker(t0)
	obs := Observed{Units: readiness.Units{Graph: graph(), Kustomizations: map[string]*kustomizev1.Kustomization{
		"cert-manager": ks("cert-manager", 1, 0, "False", "ReconciliationFailed", "Deployment/cert-manager dry-run failed"),
		"capi":         ks("capi", 1, 0, "Unknown", "Progressing", "Running health checks"),
	}}}
	for _, c := range []struct {
		after time.Duration
		want  map[string]readiness.State
	}{
		{0, map[string]readiness.State{"cert-manager": readiness.Reconciling, "capi": readiness.Reconciling}},
		{4 * time.Minute, map[string]readiness.State{"cert-manager": readiness.Reconciling, "capi": readiness.Reconciling}},
		// Past its 5m: failed for good; one still progressing is not.
		{6 * time.Minute, map[string]readiness.State{"cert-manager": readiness.Failed, "capi": readiness.Reconciling}},
	} {
		s := tr.Update(obs, t0.Add(c.after))
		for name, want := range c.want {
			if u, _ := s.Unit(name); u.State != want {
				t.Errorf("%s after %s: %s, want %s", name, c.after, u.State, want)
			}
		}
	}
}

// The release's line, under the rule of every Flux object.
func TestDescribeFlux(t *testing.T) {
	hr := func(gen, observed int64, suspend bool, conds ...metav1.Condition) *helmv2.HelmRelease {
		h := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		h.Spec.Suspend, h.Status.ObservedGeneration, h.Status.Conditions = suspend, observed, conds
		return h
	}
	ready := func(gen int64, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: "Ready", Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	for _, c := range []struct {
		hr   *helmv2.HelmRelease
		want string
	}{
		{hr(1, 0, false), "release: not reconciled yet"},
		{hr(2, 2, false, ready(2, "True", "UpgradeSucceeded", "Helm upgrade succeeded")), "release: ready"},
		{hr(3, 2, false, ready(2, "True", "UpgradeSucceeded", "Helm upgrade succeeded")), "release: UpgradeSucceeded: Helm upgrade succeeded"},
		{hr(2, 1, false, ready(2, "False", "InstallFailed", "image not found")), "release: InstallFailed: image not found"},
		{hr(2, 1, true, ready(1, "True", "InstallSucceeded", "installed")), "release: Suspended: suspended once ready"},
	} {
		if got := describeFlux(c.hr, "release"); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

func TestPrinters(t *testing.T) {
	t0 := time.Now()
	tr := NewTracker(t0)
	s := tr.Update(Observed{Units: readiness.Units{Graph: graph(), Kustomizations: map[string]*kustomizev1.Kustomization{
		"cert-manager": ks("cert-manager", 1, 1, "True", "ReconciliationSucceeded", "ok"),
		"capi":         ks("capi", 1, 1, "Unknown", "Progressing", "Reconciliation in progress"),
	}}}, t0.Add(5*time.Second))

	var plain, tty, js bytes.Buffer
	for _, c := range []struct {
		w *bytes.Buffer
		f Format
	}{{&plain, Plain}, {&tty, TTY}, {&js, JSON}} {
		p, err := New(c.w, c.f, nil, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.Phase("units")
		p.Units(s)
		p.Units(s) // unchanged: plain and JSON print nothing new
		p.Close()
	}
	if n := strings.Count(plain.String(), "unit capi: reconciling"); n != 1 {
		t.Errorf("plain printed capi %d times:\n%s", n, plain.String())
	}
	if !strings.Contains(tty.String(), "\x1b[") || !strings.Contains(tty.String(), "└── capi") {
		t.Errorf("tty output does not redraw a tree:\n%q", tty.String())
	}
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	for _, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Errorf("json line %q: %v", l, err)
		}
	}
	if len(lines) != 1+len(s.Units) {
		t.Errorf("json: %d events, want %d:\n%s", len(lines), 1+len(s.Units), js.String())
	}

	var html bytes.Buffer
	if err := WriteTimeline(&html, "bootstrap test", t0, []Span{{Name: "flux", Start: t0, End: t0.Add(time.Second)}}, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "<svg") || !strings.Contains(html.String(), "cert-manager") {
		t.Error("timeline has no bars")
	}
	var svg bytes.Buffer
	if err := WriteTimelineSVG(&svg, "bootstrap test", t0, []Span{{Name: "flux", Start: t0, End: t0.Add(time.Second)}}, s); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(svg.String(), "<svg") || !strings.Contains(svg.String(), "<style>") || !strings.Contains(svg.String(), "critical path") {
		t.Errorf("the SVG timeline does not stand alone:\n%s", svg.String())
	}
	if err := xml.Unmarshal(svg.Bytes(), new(struct{})); err != nil {
		t.Errorf("the SVG timeline is not well-formed XML: %v", err)
	}
}

// A single look (bootstrap status) has watched nothing: the time it shows is how long each unit
// has been in its state, as its Kustomization's condition records it.
func TestStatusShowsHowLongEachUnitHasBeenInItsState(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	at := func(k *kustomizev1.Kustomization, d time.Duration) *kustomizev1.Kustomization {
		k.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(d))
		return k
	}
	s := NewTracker(t0.Add(time.Hour)).Update(Observed{Units: readiness.Units{Graph: graph(), Kustomizations: map[string]*kustomizev1.Kustomization{
		"cert-manager": at(ks("cert-manager", 1, 1, "True", "ReconciliationSucceeded", "ok"), 0),
		"capi":         at(ks("capi", 1, 1, "Unknown", "Progressing", "Reconciliation in progress"), 58*time.Minute),
	}}}, t0.Add(time.Hour))
	var out bytes.Buffer
	WriteStatus(&out, "test", s)
	for _, want := range []string{"cert-manager", "ready", "1h00m", "capi", "reconciling", "2m00s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), " 0s ") {
		t.Errorf("status shows the time since the look itself:\n%s", out.String())
	}
}

// A line-oriented view says once that the release refuses a commit, and once that it healed.
func TestPrintersSayWhenTheReleaseFailsAndHeals(t *testing.T) {
	t0 := time.Now()
	units := readiness.Units{Graph: graph(), Kustomizations: map[string]*kustomizev1.Kustomization{
		"cert-manager": ks("cert-manager", 1, 1, "True", "ReconciliationSucceeded", "ok"),
	}}
	failing := NewTracker(t0).Update(Observed{Units: units, Release: "release cluster-init: UpgradeFailed: no", ReleaseFailing: true}, t0)
	healed := NewTracker(t0).Update(Observed{Units: units, Release: "release cluster-init: ready"}, t0)
	for _, f := range []Format{Plain, JSON} {
		var out bytes.Buffer
		p, err := New(&out, f, nil, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []Snapshot{healed, failing, failing, healed, healed} {
			p.Units(s)
		}
		p.Close()
		if strings.Count(out.String(), "UpgradeFailed") != 1 || strings.Count(out.String(), "release cluster-init: ready") != 1 {
			t.Errorf("%v: the release's failure and its healing, once each:\n%s", f, out.String())
		}
	}
}
