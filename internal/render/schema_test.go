package render_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// clusterChartSchema is charts/capi-cluster/values.schema.json: the part of the umbrella chart's
// schema that the cluster chart receives (its helm_values_from and the credentials Secret). One
// definition of each key: the file is derived from the umbrella's, never edited by hand, so that a
// value the umbrella refuses is refused by the cluster chart too, even in a release whose schema
// check of the umbrella was skipped.
const clusterChartSchema = "charts/capi-cluster/values.schema.json"

// clusterChartKeys are the umbrella's keys the cluster chart is given.
var clusterChartKeys = []string{"cluster", "registry_mirrors", "proxies", "credentials"}

var definitionRef = regexp.MustCompile(`"#/definitions/([A-Za-z0-9_]+)"`)

func deriveClusterChartSchema(t *testing.T, umbrella []byte) []byte {
	t.Helper()
	var u struct {
		Definitions json.RawMessage            `json:"definitions"`
		Properties  map[string]json.RawMessage `json:"properties"`
		If          json.RawMessage            `json:"if"`
		Then        json.RawMessage            `json:"then"`
	}
	if err := json.Unmarshal(umbrella, &u); err != nil {
		t.Fatal(err)
	}
	props := map[string]json.RawMessage{}
	for _, k := range clusterChartKeys {
		p, ok := u.Properties[k]
		if !ok {
			t.Fatalf("the umbrella's schema has no %s", k)
		}
		props[k] = p
	}
	// The definitions those keys use, and the ones these use in turn.
	var all map[string]json.RawMessage
	if err := json.Unmarshal(u.Definitions, &all); err != nil {
		t.Fatal(err)
	}
	used := map[string]json.RawMessage{}
	pending := []json.RawMessage{u.If, u.Then}
	for _, p := range props {
		pending = append(pending, p)
	}
	for len(pending) > 0 {
		next := pending[0]
		pending = pending[1:]
		for _, m := range definitionRef.FindAllSubmatch(next, -1) {
			name := string(m[1])
			if _, seen := used[name]; !seen {
				used[name] = all[name]
				pending = append(pending, all[name])
			}
		}
	}
	definitions, err := json.Marshal(used)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(struct {
		Schema               string                     `json:"$schema"`
		Comment              string                     `json:"$comment"`
		Title                string                     `json:"title"`
		Type                 string                     `json:"type"`
		AdditionalProperties bool                       `json:"additionalProperties"`
		Definitions          json.RawMessage            `json:"definitions"`
		Properties           map[string]json.RawMessage `json:"properties"`
		If                   json.RawMessage            `json:"if"`
		Then                 json.RawMessage            `json:"then"`
	}{
		Schema:      "http://json-schema.org/draft-07/schema#",
		Comment:     "derived from charts/cluster-init/values.schema.json (internal/render/schema_test.go): edit that one, then run the test with CLUSTER_INIT_UPDATE_SCHEMA=1",
		Title:       "capi-cluster values",
		Type:        "object",
		Definitions: definitions, Properties: props, If: u.If, Then: u.Then,
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func TestTheClusterChartsSchemaIsTheUmbrellasClusterPart(t *testing.T) {
	root := testenv.Checkout(t)
	umbrella, err := os.ReadFile(filepath.Join(root, render.UmbrellaChart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := deriveClusterChartSchema(t, umbrella)
	path := filepath.Join(root, clusterChartSchema)
	if os.Getenv("CLUSTER_INIT_UPDATE_SCHEMA") == "1" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not derived from the umbrella chart's schema: run CLUSTER_INIT_UPDATE_SCHEMA=1 go test ./internal/render -run TestTheClusterChartsSchema", clusterChartSchema)
	}
}
