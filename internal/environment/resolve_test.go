package environment

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An ENV argument names an environment's directory, by name or path; anything else is refused
// with what was expected and the environments there are.
func TestResolveTakesOnlyAnEnvironmentsDirectory(t *testing.T) {
	repo := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("environment-values/prod/kustomization.yaml", "configMapGenerator: []\n")
	write("environment-values/prod/values.yaml", "cluster: {}\n")
	write("environment-values/team/dev/kustomization.yaml", "configMapGenerator: []\n")
	write("environment-values/notes/README.md", "not an environment\n")
	write("environment-values/wl/cluster.yaml", "kind: HelmRelease\n")
	write("elsewhere/README.md", "x\n")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "kustomization.yaml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory of the current one named like an environment, but none: the environment wins.
	write("team/dev/README.md", "not an environment\n")
	t.Chdir(repo)

	for _, c := range []struct{ arg, name string }{
		{"prod", "prod"},
		{"prod/", "prod"},
		{"team/dev", "team/dev"},
		{"environment-values/prod", "prod"},
		{"./environment-values/team/dev", "team/dev"},
		{filepath.Join(repo, "environment-values", "prod"), "prod"},
		{outside, outside},
	} {
		name, dir, err := Resolve(repo, c.arg)
		if err != nil || name != c.name || !filepath.IsAbs(dir) {
			t.Errorf("Resolve(%q) = %q, %q, %v; want %q", c.arg, name, dir, err, c.name)
		}
	}
	for _, c := range []struct{ arg, want string }{
		{"environment-values/prod/values.yaml", "is a file: expected the directory of an environment, environment-values/prod, or its name (environments: prod, team/dev)"},
		{"prod/kustomization.yaml/", "is a file"},
		{"elsewhere/README.md", "is a file: expected the directory of an environment or its name (environments: prod, team/dev)"},
		{"notes", "notes is not an environment: it has no kustomization.yaml"},
		{"environment-values", "is not an environment"},
		{".", "is not an environment"},
		{"team", "is not an environment"},
		{"wl", "is a workload cluster"},
		{"environment-values/wl/cluster.yaml", "is a workload cluster"},
		{"nope", `environment "nope": no directory environment-values/nope (environments: prod, team/dev)`},
		{"./nope", `environment "./nope": no such directory (environments: prod, team/dev)`},
	} {
		_, _, err := Resolve(repo, c.arg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Resolve(%q): %v; want an error with %q", c.arg, err, c.want)
		}
	}
}
