package testenv

import (
	"path/filepath"
	"testing"

	"cluster-init.dev/cluster-init/internal/checkout"
	"cluster-init.dev/cluster-init/internal/environment"
)

// Checkout is the root of the repository the test runs in: charts, components and environments
// are read from the working tree, as the CLI reads them.
func Checkout(t testing.TB) string {
	t.Helper()
	root, err := checkout.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Environment loads environment-values/NAME of the checkout at root, with file names shown
// relative to it as the CLI shows them.
func Environment(t testing.TB, root, name string) *environment.Environment {
	t.Helper()
	return EnvironmentIn(t, root, name, filepath.Join(root, environment.Dir, name))
}

// EnvironmentIn loads environment name from dir (a copy of it, changed by a test).
func EnvironmentIn(t testing.TB, root, name, dir string) *environment.Environment {
	t.Helper()
	env, err := environment.Load(name, dir, func(p string) string { return checkout.Relative(root, p) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
