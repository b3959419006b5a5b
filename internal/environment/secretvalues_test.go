package environment

import (
	"slices"
	"testing"

	"cluster-init.dev/cluster-init/internal/values"
)

// What is hidden: secret leaves, credentials of any layer, passwords in URLs; not the user names
// that go with them.
func TestSecretValues(t *testing.T) {
	parse := func(file, text string, secret bool) values.Layer {
		l, err := values.ParseLayer(file, []byte(text), secret)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	env := &Environment{Layers: []values.Layer{
		parse("values.yaml", "proxies:\n  http_proxy: http://bob:hunter2@proxy:3128\n  https_proxy: http://eve:ab/c?d#e@proxy:3128\n", false),
		parse("secrets.yaml", "credentials:\n  git:\n    username: cluster-init\n    password: t0ken-value\n", true),
	}}
	extra := parse("more.yaml", "credentials:\n  other: from-values\n", false)
	got := env.SecretValues(extra)
	for _, want := range []string{"t0ken-value", "hunter2", "http://bob:hunter2@proxy:3128", "ab/c?d#e", "from-values"} {
		if !slices.Contains(got, want) {
			t.Errorf("%q is not hidden: %q", want, got)
		}
	}
	if slices.Contains(got, "cluster-init") {
		t.Errorf("the git user name is hidden, and with it every word it shares: %q", got)
	}
}
