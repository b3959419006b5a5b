// Command cloudinit-commands turns a machine's cloud-config into the commands that carry it
// out in a kind node container, with Cluster API's own translation (the one CAPD runs for its
// machines, kind fix-ups for kubeadm included): reads the cloud-config on standard input, writes
// the commands as JSON ([{"Cmd", "Args", "Stdin", "Retry"}]).
//
// CAPD keeps that translation in an internal package of the sigs.k8s.io/cluster-api/test
// module; Go lets only code under sigs.k8s.io/cluster-api/test/infrastructure/docker import it,
// hence this small module of its own, under that path, outside the project's module.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/cluster-api/test/infrastructure/docker/internal/provisioning/cloudinit"
	"sigs.k8s.io/cluster-api/test/infrastructure/kind"
)

func main() {
	version := flag.String("kubernetes-version", "", "Kubernetes version of the node image (v1.37.0): selects kind's mode, as CAPD does")
	image := flag.String("image", "", "the node image the machine runs")
	flag.Parse()
	if err := run(*version, *image, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cloudinit-commands:", err)
		os.Exit(1)
	}
}

func run(version, image string, in io.Reader, out io.Writer) error {
	v, err := semver.ParseTolerant(version)
	if err != nil {
		return fmt.Errorf("--kubernetes-version %q: %w", version, err)
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("read the cloud-config: %w", err)
	}
	cmds, err := cloudinit.RawCloudInitToProvisioningCommands(data, kind.GetMapping(v, image))
	if err != nil {
		return fmt.Errorf("translate the cloud-config: %w", err)
	}
	return json.NewEncoder(out).Encode(cmds)
}
