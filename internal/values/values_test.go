package values

import (
	"strings"
	"testing"
)

func TestParseLayerErrorsNameFileAndLineAndHideSecrets(t *testing.T) {
	_, err := ParseLayer("env/values.yaml", []byte("cluster:\n  name: x\n   bad: [\n"), false)
	if err == nil || !strings.HasPrefix(err.Error(), "env/values.yaml:3: invalid YAML") {
		t.Errorf("values error: %v", err)
	}
	_, err = ParseLayer("env/values.yaml", []byte("- a\n- b\n"), false)
	if err == nil || !strings.Contains(err.Error(), "env/values.yaml:1: expected a map of values at the top level, got a list") {
		t.Errorf("list error: %v", err)
	}
	// The parser quotes the offending token: shown for a values file, hidden for a secrets file.
	quoting := []byte("credentials: !!int topsecret\n")
	if _, err = ParseLayer("env/values.yaml", quoting, false); err == nil || !strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("the parser no longer quotes the token, this test proves nothing: %v", err)
	}
	_, err = ParseLayer("env/secrets.yaml", quoting, true)
	if err == nil || !strings.Contains(err.Error(), "env/secrets.yaml") || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("secret error: %v", err)
	}
	l, err := ParseLayer("empty.yaml", []byte("# nothing\n"), false)
	if err != nil || len(l.Data) != 0 {
		t.Errorf("empty file: %v %v", l.Data, err)
	}
}

func TestLocateFindsTheLayerAndLineThatSetAKey(t *testing.T) {
	defaults, _ := ParseLayer("chart/values.yaml", []byte("cluster:\n  name: m\n  workers:\n    replicas: 1\n"), false)
	defaults.Defaults = true
	env, _ := ParseLayer("env/values.yaml", []byte("# env\ncluster:\n  workers:\n    replicas: 3\n"), false)
	secrets, _ := ParseLayer("env/secrets.yaml", []byte("credentials:\n  git:\n    password: x\n"), true)
	layers := []Layer{defaults, env, secrets}
	fallback := Origin{File: "env/values.yaml"}

	cases := []struct {
		path []string
		want string
	}{
		{[]string{"cluster", "workers", "replicas"}, "env/values.yaml:4"},
		{[]string{"cluster", "workers", "flavor"}, "env/values.yaml:3"}, // missing: its parent
		{[]string{"cluster", "name"}, "env/values.yaml:2"},              // set by the defaults only
		{[]string{"credentials", "git", "password"}, "env/secrets.yaml:3"},
		{[]string{"proxies"}, "env/values.yaml"},
	}
	for _, c := range cases {
		if got := Locate(layers, c.path, fallback).String(); got != c.want {
			t.Errorf("Locate(%v) = %s, want %s", c.path, got, c.want)
		}
	}
	if !Locate(layers, []string{"credentials", "git"}, fallback).Secret {
		t.Error("a key of the secrets layer is not marked secret")
	}
	merged := Merge(layers...)
	if merged["cluster"].(map[string]any)["workers"].(map[string]any)["replicas"] != float64(3) {
		t.Errorf("merge: %v", merged)
	}
	if merged["cluster"].(map[string]any)["name"] != "m" {
		t.Errorf("merge lost a default: %v", merged)
	}
}

func TestKeyFormatsPathsAsUsersWriteThem(t *testing.T) {
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"cluster", "control_plane", "replicas"}, "cluster.control_plane.replicas"},
		{[]string{"registry_mirrors", "hosts_config", "quay.io", "0", "mirror_url"}, `registry_mirrors.hosts_config["quay.io"][0].mirror_url`},
		{[]string{"units", "cert-manager", "depends_on"}, "units.cert-manager.depends_on"},
		{nil, "(top level)"},
	} {
		if got := Key(c.path); got != c.want {
			t.Errorf("Key(%v) = %s, want %s", c.path, got, c.want)
		}
	}
}

func TestSchemaProblemsNeverShowSecretValues(t *testing.T) {
	schema, err := CompileSchema("schema.json", []byte(`{"type":"object","properties":{"credentials":{"type":"object","properties":{"token":{"type":"string","pattern":"^tok-"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := ParseLayer("secrets.yaml", []byte("credentials:\n  token: hunter2\n"), true)
	problems := schema.Validate([]Layer{secrets}, Origin{File: "values.yaml"})
	if len(problems) != 1 {
		t.Fatalf("problems: %v", problems)
	}
	msg := problems.Error()
	if !strings.Contains(msg, "secrets.yaml:2: credentials.token") || strings.Contains(msg, "hunter2") {
		t.Errorf("problem: %s", msg)
	}
}
