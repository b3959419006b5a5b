package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkValidateAll is what a merge request's validate-environments job pays: every
// environment of this checkout, with the build cache as the previous run left it.
func BenchmarkValidateAll(b *testing.B) {
	for b.Loop() {
		cmd := newRootCommand()
		cmd.SetOut(io.Discard)
		cmd.SetArgs([]string{"validate", "--all"})
		if err := cmd.Execute(); err != nil {
			b.Fatal(err)
		}
	}
}

// manyTenants are the values of a platform of n tenants, each with a prefix and a directory of
// its own.
func manyTenants(n int) string {
	var v strings.Builder
	v.WriteString("source:\n  type: git\n  url: https://git.example.invalid/platform.git\nworkload_clusters:\n  tenants:\n    workload-clusters:\n      name_prefix: wl-\n")
	for i := range n {
		fmt.Fprintf(&v, "    t%04d:\n      name_prefix: p%04d-\n      path: ./clusters/management/t%04d\n", i, i, i)
	}
	return v.String()
}

// BenchmarkValidateManyTenants is validate of a platform of 5,000 tenants: every check between
// tenants (prefixes, namespaces, directories) must stay near linear in their number.
func BenchmarkValidateManyTenants(b *testing.B) {
	file := filepath.Join(b.TempDir(), "tenants.yaml")
	if err := os.WriteFile(file, []byte(manyTenants(5000)), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		cmd := newRootCommand()
		cmd.SetOut(io.Discard)
		cmd.SetArgs([]string{"validate", "kubeadm-capd", "--values", file})
		if err := cmd.Execute(); err != nil {
			b.Fatal(err)
		}
	}
}
