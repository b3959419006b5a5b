// Command openstack runs the test bed's OpenStack cloud (see README.md).
//
//	go run ./tools/testbed/openstack serve [--port 8788] [--admin 127.0.0.1:8789] [--clouds-yaml FILE]
//	go run ./tools/testbed/openstack remove-servers
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"cluster-init.dev/cluster-init/tools/testbed/openstack/simulator"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: openstack serve [flags] | remove-servers")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "remove-servers":
		err = simulator.RemoveServers(context.Background())
	default:
		err = fmt.Errorf("unknown command %q, expected serve or remove-servers", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openstack:", err)
		os.Exit(1)
	}
}

type imageFlags map[string]string

func (f imageFlags) String() string { return fmt.Sprint(map[string]string(f)) }

func (f imageFlags) Set(v string) error {
	name, ref, ok := strings.Cut(v, "=")
	if !ok || name == "" || ref == "" {
		return fmt.Errorf("%q: expected NAME=DOCKER_IMAGE", v)
	}
	f[name] = ref
	return nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	network := fs.String("network", "kind", "Docker network of the servers")
	port := fs.Int("port", 8788, "port of the OpenStack APIs on the network's gateway")
	admin := fs.String("admin", "127.0.0.1:8789", "listen address of the admin API")
	cloudsYAML := fs.String("clouds-yaml", "", "write a clouds.yaml with the cloud's application credential here (0600)")
	repo := fs.String("repo", ".", "the checkout, whose cloudinit-commands helper is built")
	debug := fs.Bool("debug", false, "log every call")
	lbImage := fs.String("load-balancer-image", "", "the haproxy image of Octavia's load balancers (default: the test bed's kindest/haproxy)")
	images := imageFlags{}
	fs.Var(images, "image", "a Glance image and the Docker image its servers run, NAME=DOCKER_IMAGE (repeatable; default kindest-node-v1.37.0=kindest/node:v1.37.0)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(images) == 0 {
		images["kindest-node-v1.37.0"] = "kindest/node:v1.37.0"
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "openstack-simulator-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	helper, err := simulator.BuildHelper(ctx, *repo, dir)
	if err != nil {
		return err
	}
	if *lbImage == "" {
		if *lbImage, err = simulator.LoadBalancerImage(ctx); err != nil {
			logger.Warn("Octavia keeps its load balancers as records only", "reason", err)
		}
	}
	sim, err := simulator.Start(simulator.Options{Network: *network, Port: *port, AdminAddress: *admin, Images: images,
		CloudInitCommands: helper, LoadBalancerImage: *lbImage, Logger: logger})
	if err != nil {
		return err
	}
	defer sim.Close()
	if *cloudsYAML != "" {
		// Removed first: a file that exists keeps its mode through a write.
		if err := os.Remove(*cloudsYAML); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("replace the clouds.yaml: %w", err)
		}
		if err := os.WriteFile(*cloudsYAML, []byte(sim.CloudsYAML()), 0o600); err != nil {
			return fmt.Errorf("write the clouds.yaml: %w", err)
		}
		abs, _ := filepath.Abs(*cloudsYAML)
		logger.Info("clouds.yaml written", "path", abs, "cloud", simulator.CloudName)
	}
	logger.Info("serving", "identity", sim.URL+"/identity/v3", "admin", sim.AdminURL, "external network", simulator.ExternalNetworkID)
	<-ctx.Done()
	logger.Info("stopping; the servers' containers stay (remove-servers removes them)")
	return nil
}
