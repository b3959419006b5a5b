package main

import "testing"

func BenchmarkValidateAll(b *testing.B) {
	for b.Loop() {
		cmd := newRootCommand()
		cmd.SetArgs([]string{"validate", "--all"})
		if err := cmd.Execute(); err != nil {
			b.Fatal(err)
		}
	}
}
