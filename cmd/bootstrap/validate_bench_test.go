package main

import (
	"io"
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
