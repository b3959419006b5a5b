package apply_test

import (
	"strings"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/utils"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/redact"
	"cluster-init.dev/cluster-init/internal/testenv"
)

const objects = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: demo}
data: {a: "1"}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: src, namespace: demo}
spec: {interval: 5m, url: "oci://registry.test/src", ref: {tag: v1}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: web:1}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: demo}
`

func TestApplyIsStagedAndIdempotent(t *testing.T) {
	c := testenv.Start(t, "test")
	objs, err := utils.ReadObjects(strings.NewReader(objects))
	if err != nil {
		t.Fatal(err)
	}
	a := apply.New(c)
	// The Namespace comes last in the list: staging applies it first.
	cs, err := a.Apply(t.Context(), objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Entries) != len(objs) {
		t.Fatalf("first apply: %d entries for %d objects", len(cs.Entries), len(objs))
	}
	for _, e := range cs.Entries {
		if e.Action != ssa.CreatedAction {
			t.Errorf("first apply: %s %s", e.Subject, e.Action)
		}
	}
	cs, err = a.Apply(t.Context(), objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range cs.Entries {
		if e.Action != ssa.UnchangedAction {
			t.Errorf("second apply: %s %s", e.Subject, e.Action)
		}
	}

	if len(cs.Entries) != len(objs) {
		t.Errorf("second apply: %d entries for %d objects", len(cs.Entries), len(objs))
	}
}

// An API server's refusal quotes the value it refused: a credential that reached a field it
// does not fit shows in the apply error, and the CLI's redactor (which every command's error
// goes through) hides it.
func TestApplyErrorsQuoteValuesAndTheRedactorHidesThem(t *testing.T) {
	const secret = "Pl4nted-apply-S3CRET"
	c := testenv.Start(t, "test")
	objs, err := utils.ReadObjects(strings.NewReader(`
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: src, namespace: demo}
spec: {interval: 5m, url: "oci://registry.test/src", ref: {tag: v1}, provider: "` + secret + `"}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = apply.New(c).Apply(t.Context(), objs)
	if err == nil || !strings.Contains(err.Error(), secret) {
		t.Fatalf("the apply error does not quote the refused value, this test proves nothing: %v", err)
	}
	if hidden := redact.New(secret).Error(err); strings.Contains(hidden.Error(), secret) || !strings.Contains(hidden.Error(), "OCIRepository") {
		t.Errorf("redacted apply error: %v", hidden)
	}
}
