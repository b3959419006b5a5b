package cleanup

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	"cluster-init.dev/cluster-init/internal/records"
)

// kindClusterLabel is the label CAPD (like kind) puts on the containers of a cluster. It does not
// tell a CAPD machine from a kind node of a cluster with the same name: what is removed is what
// the clusters of this environment define, by the names CAPD gives their containers.
const kindClusterLabel = "io.x-k8s.kind.cluster"

// Container is a container of the host labelled as a kind or CAPD node.
type Container struct {
	ID, Name string
	// Cluster is its kindClusterLabel: the kind or CAPD cluster it is a node of.
	Cluster string
}

// Containers are the host's containers of kind and CAPD nodes, as cleanup removes them: listed
// by their label, removed by ID. DockerCLI is the host's; the decision of which to remove is
// choose's, so that it can be tested without Docker.
type Containers interface {
	// Labelled lists the containers that carry kindClusterLabel.
	Labelled(ctx context.Context) ([]Container, error)
	// Remove removes the containers and their volumes.
	Remove(ctx context.Context, containers []Container) error
}

// choose splits the containers of the named clusters into those this environment owns and those
// it does not know: another kind cluster or CAPD cluster with the same name.
func choose(all []Container, clusters []string, owned records.Owned) (remove, foreign []Container) {
	for _, c := range all {
		if !contains(clusters, c.Cluster) {
			continue
		}
		if owned[c.Name] {
			remove = append(remove, c)
		} else {
			foreign = append(foreign, c)
		}
	}
	return remove, foreign
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// DockerCLI is the host's containers, through the docker CLI.
type DockerCLI struct{}

var _ Containers = DockerCLI{}

// Labelled lists the host's containers that carry the kind cluster label.
func (DockerCLI) Labelled(ctx context.Context) ([]Container, error) {
	out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label="+kindClusterLabel,
		"--format", `{{.ID}}\t{{.Names}}\t{{.Label "`+kindClusterLabel+`"}}`).Output()
	if err != nil {
		return nil, fmt.Errorf("list the containers labelled %s: %w", kindClusterLabel, err)
	}
	var all []Container
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 3 {
			all = append(all, Container{ID: f[0], Name: f[1], Cluster: f[2]})
		}
	}
	return all, nil
}

// Remove removes the containers with `docker rm -f -v`.
func (DockerCLI) Remove(ctx context.Context, containers []Container) error {
	ids := make([]string, len(containers))
	for i, c := range containers {
		ids[i] = c.ID
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", append([]string{"rm", "-f", "-v"}, ids...)...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker rm: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// removeContainers removes the containers of the clusters that this environment owns, and names
// the ones with the same cluster label that it leaves alone.
func removeContainers(ctx context.Context, host Containers, clusters []string, owned records.Owned, log func(string, ...any)) error {
	all, err := host.Labelled(ctx)
	if err != nil {
		return err
	}
	remove, foreign := choose(all, clusters, owned)
	for _, c := range foreign {
		log("leaving container %s alone: labelled %s=%s, but no machine of this environment has that name (another cluster of the same name?)", c.Name, kindClusterLabel, c.Cluster)
	}
	if len(remove) == 0 {
		log("no container of %s left", strings.Join(clusters, ", "))
		return nil
	}
	names := make([]string, len(remove))
	for i, c := range remove {
		names[i] = c.Name
	}
	log("removing %d containers: %s", len(remove), strings.Join(names, ", "))
	if err := host.Remove(ctx, remove); err != nil {
		return fmt.Errorf("remove containers %s: %w", strings.Join(names, ", "), err)
	}
	return nil
}
