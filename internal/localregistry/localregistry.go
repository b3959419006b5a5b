// Package localregistry runs the OCI registry next to the kind cluster: a container on kind's
// Docker network, published on a loopback port of the host. The CLI pushes the checkout to it;
// the clusters (the kind cluster, then the CAPD machines, on the same network) pull from it by
// its container name.
package localregistry

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Registry is the registry container.
type Registry struct {
	Name     string // container name, also its host name inside the Docker network
	Image    string
	Network  string
	HostPort int
}

// PushAddress is where the host reaches it.
func (r Registry) PushAddress() string { return fmt.Sprintf("127.0.0.1:%d", r.HostPort) }

// ClusterAddress is where containers of its network (kind and CAPD nodes, their pods) reach it.
func (r Registry) ClusterAddress() string { return r.Name + ":5000" }

func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// Ensure starts the registry if it does not run, reusing its container and data volume, and
// waits until it answers.
func (r Registry) Ensure(ctx context.Context) error {
	state, err := docker(ctx, "container", "inspect", "--format", "{{.State.Running}}", r.Name)
	switch {
	case err != nil: // no such container
		if _, err := docker(ctx, "run", "-d", "--name", r.Name, "--network", r.Network, "--restart", "unless-stopped",
			"-p", fmt.Sprintf("127.0.0.1:%d:5000", r.HostPort), "-v", r.Name+":/var/lib/registry", r.Image); err != nil {
			return fmt.Errorf("start registry %s: %w", r.Name, err)
		}
	case state != "true":
		if _, err := docker(ctx, "start", r.Name); err != nil {
			return fmt.Errorf("start registry %s: %w", r.Name, err)
		}
	}
	networks, err := docker(ctx, "container", "inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", r.Name)
	if err != nil {
		return err
	}
	if !strings.Contains(" "+networks+" ", " "+r.Network+" ") {
		if _, err := docker(ctx, "network", "connect", r.Network, r.Name); err != nil {
			return fmt.Errorf("connect registry %s to network %s: %w", r.Name, r.Network, err)
		}
	}
	return r.wait(ctx)
}

// wait waits until the registry answers its API root.
func (r Registry) wait(ctx context.Context) error {
	url := "http://" + r.PushAddress() + "/v2/"
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		last = fmt.Errorf("HTTP %d", resp.StatusCode)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("registry %s does not answer on %s: %v", r.Name, url, last)
	}
	return nil
}
