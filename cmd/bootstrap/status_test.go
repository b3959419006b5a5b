package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"cluster-init.dev/cluster-init/internal/testenv"
)

// status --watch follows a cluster with bootstrap's printer until interrupted, and ends cleanly.
func TestStatusWatchFollowsUntilInterrupted(t *testing.T) {
	c := testenv.Start(t, "mgmt")
	kubeconfig := kubeconfigFile(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"status", "kubeadm-capd", "--kubeconfig", kubeconfig, "--watch", "-o", "plain"})
	start := time.Now()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("status --watch: %v\n%s", err, out.String())
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Errorf("status --watch returned after %s, before it was interrupted", took)
	}
	if got := out.String(); strings.Count(got, "release cluster-init: not created yet") != 1 {
		t.Errorf("status --watch printed (each change once):\n%s", got)
	}
}
