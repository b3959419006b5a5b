// Package kindcluster creates, finds and deletes the kind bootstrap cluster through kind's Go
// library: Docker socket mounted for CAPD, containerd registry mirrors, pod and service subnets
// that do not collide with the clusters it creates, and kind's default CNI off (the CLI installs
// the same CNI as on every cluster). It refuses to touch a kind cluster it did not create.
package kindcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindlog "sigs.k8s.io/kind/pkg/log"

	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/envmarker"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/registrymirror"
)

// Config describes the bootstrap cluster.
type Config struct {
	Name          string
	NodeImage     string
	PodSubnet     string
	ServiceSubnet string
	Mirrors       registrymirror.Config
	// Environment is the environment the cluster bootstraps; a cluster created for another
	// environment is refused.
	Environment string
}

// Manager handles kind clusters. Its directory (statedir.Dir.KindClusters) keeps, per cluster, the
// files mounted into its node (containerd registry configuration), its kubeconfig and the record
// of its creation.
type Manager struct {
	provider *cluster.Provider
	root     string
}

// New returns a manager of the kind clusters whose files are under dir; log receives kind's
// progress messages.
func New(dir string, log func(string)) *Manager {
	return &Manager{
		provider: cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(logger{log})),
		root:     dir,
	}
}

func (m *Manager) dir(name string) string { return filepath.Join(m.root, name) }

// KubeconfigPath is where the cluster's kubeconfig is kept (mode 0600).
func (m *Manager) KubeconfigPath(name string) string { return filepath.Join(m.dir(name), "kubeconfig") }

// Exists tells whether a kind cluster of that name exists.
func (m *Manager) Exists(name string) (bool, error) {
	names, err := m.provider.List()
	if err != nil {
		return false, fmt.Errorf("list kind clusters: %w", err)
	}
	return slices.Contains(names, name), nil
}

// record is written before kind creates the cluster: a cluster that exists without its marker but
// with this record was being created by cluster-init when it was interrupted.
type record struct {
	Environment string `json:"environment"`
	// Complete is set once the cluster is created and marked.
	Complete bool `json:"complete"`
}

func (m *Manager) writeRecord(name string, r record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(m.dir(name), "record.json"), data, 0o600)
}

// Ensure returns a connection to the bootstrap cluster, creating it if needed. created tells
// whether it was created now.
func (m *Manager) Ensure(ctx context.Context, cfg Config) (c *kube.Cluster, created bool, err error) {
	exists, err := m.Exists(cfg.Name)
	if err != nil {
		return nil, false, err
	}
	if exists {
		c, err := m.Connect(cfg.Name)
		if err == nil {
			err = checkMarker(ctx, c, cfg)
		}
		if err == nil {
			return c, false, nil
		}
		if !m.interruptedCreation(cfg) {
			return nil, false, err
		}
		// Half-created by an interrupted run of ours, never used: start again.
		if err := m.Delete(cfg.Name); err != nil {
			return nil, false, err
		}
	}
	if err := m.create(cfg); err != nil {
		return nil, false, err
	}
	c, err = m.Connect(cfg.Name)
	if err != nil {
		return nil, true, err
	}
	if err := envmarker.Write(ctx, c.Client, cfg.Environment); err != nil {
		return nil, true, err
	}
	if err := m.writeRecord(cfg.Name, record{Environment: cfg.Environment, Complete: true}); err != nil {
		return nil, true, err
	}
	return c, true, nil
}

func (m *Manager) interruptedCreation(cfg Config) bool {
	data, err := os.ReadFile(filepath.Join(m.dir(cfg.Name), "record.json"))
	if err != nil {
		return false
	}
	var r record
	return json.Unmarshal(data, &r) == nil && r.Environment == cfg.Environment && !r.Complete
}

func (m *Manager) create(cfg Config) error {
	dir := m.dir(cfg.Name)
	// kind writes the kubeconfig itself: the directory it goes in is its owner's alone.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	certs := filepath.Join(dir, "certs.d")
	if err := os.RemoveAll(certs); err != nil {
		return err
	}
	for _, host := range cfg.Mirrors.Hosts() {
		if err := os.MkdirAll(filepath.Join(certs, host), 0o755); err != nil {
			return err
		}
		hosts, err := cfg.Mirrors.HostsTOML(host)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(certs, host, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(certs, 0o755); err != nil {
		return err
	}
	if err := m.writeRecord(cfg.Name, record{Environment: cfg.Environment}); err != nil {
		return err
	}

	kc := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Networking: v1alpha4.Networking{
			PodSubnet:         cfg.PodSubnet,
			ServiceSubnet:     cfg.ServiceSubnet,
			DisableDefaultCNI: true,
		},
		Nodes: []v1alpha4.Node{{
			Role:  v1alpha4.ControlPlaneRole,
			Image: cfg.NodeImage,
			ExtraMounts: []v1alpha4.Mount{
				// CAPD creates the machines as containers of the host's Docker engine.
				{HostPath: "/var/run/docker.sock", ContainerPath: "/var/run/docker.sock"},
				{HostPath: certs, ContainerPath: "/etc/containerd/certs.d", Readonly: true},
			},
		}},
		ContainerdConfigPatches: []string{
			"[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n",
		},
	}
	v1alpha4.SetDefaultsCluster(kc)
	err := m.provider.Create(cfg.Name,
		cluster.CreateWithV1Alpha4Config(kc),
		cluster.CreateWithKubeconfigPath(m.KubeconfigPath(cfg.Name)),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false))
	if err != nil {
		return fmt.Errorf("create kind cluster %s: %w", cfg.Name, err)
	}
	return os.Chmod(m.KubeconfigPath(cfg.Name), 0o600)
}

// Connect returns a connection to an existing kind cluster.
func (m *Manager) Connect(name string) (*kube.Cluster, error) {
	kubeconfig, err := m.provider.KubeConfig(name, false)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of kind cluster %s: %w", name, err)
	}
	return kube.FromKubeconfig("bootstrap", []byte(kubeconfig))
}

// checkMarker fails unless the kind cluster cfg.Name is marked for cfg.Environment.
func checkMarker(ctx context.Context, c *kube.Cluster, cfg Config) error {
	env, found, err := envmarker.Read(ctx, c.Client)
	if err != nil {
		return fmt.Errorf("kind cluster %s: %w", cfg.Name, err)
	}
	if !found {
		return fmt.Errorf("kind cluster %s exists but was not created by cluster-init (no ConfigMap %s/%s): delete it, or set bootstrap_cluster.name to another name",
			cfg.Name, envmarker.Namespace, envmarker.Name)
	}
	if env != cfg.Environment {
		return fmt.Errorf("kind cluster %s bootstraps environment %q, not %q: run `bootstrap cleanup %s` first, or set bootstrap_cluster.name to another name",
			cfg.Name, env, cfg.Environment, env)
	}
	return nil
}

// Owns fails unless the kind cluster name (connected as c) is cluster-init's for environment, as
// far as this manager's state directory knows: its marker names environment, or it has no marker
// and this directory's record says cluster-init was creating it for environment when it was
// interrupted. A kind cluster of that name that cluster-init did not create is not its to delete.
func (m *Manager) Owns(ctx context.Context, c *kube.Cluster, name, environment string) error {
	_, found, err := envmarker.Read(ctx, c.Client)
	switch {
	case err != nil:
		return fmt.Errorf("kind cluster %s: %w", name, err)
	case !found:
		if m.interruptedCreation(Config{Name: name, Environment: environment}) {
			return nil
		}
		return fmt.Errorf("kind cluster %s was not created by cluster-init for %s (no ConfigMap %s/%s in it, no record of its creation in %s)", name, environment, envmarker.Namespace, envmarker.Name, m.dir(name))
	}
	return envmarker.Check(ctx, c.Client, environment)
}

// Delete deletes the kind cluster and its state.
func (m *Manager) Delete(name string) error {
	if err := m.provider.Delete(name, m.KubeconfigPath(name)); err != nil {
		return fmt.Errorf("delete kind cluster %s: %w", name, err)
	}
	if err := os.RemoveAll(m.dir(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// logger passes kind's user-facing messages on.
type logger struct{ print func(string) }

func (l logger) Warn(msg string) { l.print("warning: " + msg) }
func (l logger) Warnf(format string, args ...any) {
	l.print("warning: " + fmt.Sprintf(format, args...))
}
func (l logger) Error(msg string)                         { l.print("error: " + msg) }
func (l logger) Errorf(format string, args ...any)        { l.print("error: " + fmt.Sprintf(format, args...)) }
func (l logger) V(level kindlog.Level) kindlog.InfoLogger { return infoLogger{l.print, level == 0} }

type infoLogger struct {
	print   func(string)
	enabled bool
}

func (l infoLogger) Info(msg string) {
	if l.enabled {
		l.print(msg)
	}
}
func (l infoLogger) Infof(format string, args ...any) { l.Info(fmt.Sprintf(format, args...)) }
func (l infoLogger) Enabled() bool                    { return l.enabled }

// LoadImage copies an image of the host's Docker engine into the cluster's nodes (like `kind load
// docker-image`), unless they already have it. It returns false when the host does not have it.
func (m *Manager) LoadImage(ctx context.Context, name, image string) (bool, error) {
	id, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", image).Output()
	if err != nil {
		return false, nil
	}
	nodeList, err := m.provider.ListInternalNodes(name)
	if err != nil {
		return false, fmt.Errorf("nodes of kind cluster %s: %w", name, err)
	}
	for _, n := range nodeList {
		if have, err := nodeutils.ImageID(n, image); err == nil && have == strings.TrimSpace(string(id)) {
			continue
		}
		save := exec.CommandContext(ctx, "docker", "save", image)
		r, err := save.StdoutPipe()
		if err != nil {
			return false, err
		}
		if err := save.Start(); err != nil {
			return false, fmt.Errorf("docker save %s: %w", image, err)
		}
		loadErr := nodeutils.LoadImageArchive(n, r)
		if err := save.Wait(); err != nil && loadErr == nil {
			loadErr = fmt.Errorf("docker save %s: %w", image, err)
		}
		if loadErr != nil {
			return false, fmt.Errorf("load image %s into node %s: %w", image, n.String(), loadErr)
		}
	}
	return true, nil
}

// Nodes lists the nodes of the kind cluster of that name.
func (m *Manager) Nodes(name string) ([]nodes.Node, error) {
	list, err := m.provider.ListInternalNodes(name)
	if err != nil {
		return nil, fmt.Errorf("nodes of cluster %s: %w", name, err)
	}
	return list, nil
}

// PullImage has node pull image through its container runtime, and so through the registry
// mirrors it is configured with, as the kubelet would for a pod that needs it.
func PullImage(ctx context.Context, node nodes.Node, image string) error {
	var out bytes.Buffer
	cmd := node.CommandContext(ctx, "crictl", "pull", image)
	cmd.SetStdout(&out)
	cmd.SetStderr(&out)
	if err := cmd.Run(); err != nil {
		// kind's error names the whole command; crictl's last line says why.
		if why := lastLine(out.String()); why != "" {
			return fmt.Errorf("pull %s into node %s: %s", image, node.String(), why)
		}
		return fmt.Errorf("pull %s into node %s: %w", image, node.String(), err)
	}
	return nil
}

// lastLine is the last line of a command's output: crictl says why it failed last.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}
