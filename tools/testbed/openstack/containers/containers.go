// Package containers makes the simulated cloud's servers real: a server is a container of a kind
// node image on the test bed's Docker network, at the address of its port, started as CAPD
// starts its machines; it then runs its cloud-init user data, translated by Cluster API's own
// code (the cloudinit-commands helper), and what that prints is the server's console.
package containers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud"
)

// Label marks the containers of servers, with the server's ID as value.
const Label = "cluster-init.dev/openstack-server"

// Config says where servers run.
type Config struct {
	// Network is the Docker network of the servers; Subnet is its IPv4 subnet (a server's fixed
	// address must be in it).
	Network string
	Subnet  netip.Prefix
	// CloudInitCommands is the path of the cloudinit-commands helper.
	CloudInitCommands string
	// NamePrefix goes before a server's name to name its container.
	NamePrefix string
	Logger     *slog.Logger
}

// Machines runs servers as containers. Use New.
type Machines struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	console map[string]*bytes.Buffer
	stop    map[string]context.CancelFunc
	wg      sync.WaitGroup
}

var _ cloud.Machines = (*Machines)(nil)

// New checks the helper and returns the machines.
func New(cfg Config) (*Machines, error) {
	if cfg.Network == "" || !cfg.Subnet.IsValid() {
		return nil, fmt.Errorf("containers: a Docker network and its subnet are required (got %q, %s)", cfg.Network, cfg.Subnet)
	}
	if _, err := exec.LookPath(cfg.CloudInitCommands); err != nil {
		return nil, fmt.Errorf("containers: the cloudinit-commands helper: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "openstack-"
	}
	return &Machines{cfg: cfg, log: cfg.Logger, console: map[string]*bytes.Buffer{}, stop: map[string]context.CancelFunc{}}, nil
}

// Close stops the cloud-init runs still going (the containers stay) and waits for them.
func (m *Machines) Close() {
	m.mu.Lock()
	for _, cancel := range m.stop {
		cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *Machines) containerName(name string) string { return m.cfg.NamePrefix + name }

// Boot starts the server's container, as CAPD starts a machine's (privileged, its own cgroup
// namespace, /var a volume, /tmp and /run in memory), at the server's fixed address; its
// floating IPs are added. The cloud-init run goes on in the background.
func (m *Machines) Boot(ctx context.Context, s cloud.MachineSpec) error {
	if !m.cfg.Subnet.Contains(s.FixedIP) {
		return fmt.Errorf("the server's address %s is outside the Docker network %s (%s) the test bed's servers run on: give the cluster a subnet inside it",
			s.FixedIP, m.cfg.Network, m.cfg.Subnet)
	}
	if s.DockerImage == "" {
		return fmt.Errorf("the image has no Docker image behind it")
	}
	name := m.containerName(s.Name)
	m.write(s.ServerID, "boot: container %s of %s at %s\n", name, s.DockerImage, s.FixedIP)
	args := []string{"run", "--detach", "--tty", "--name", name, "--hostname", s.Metadata["local_hostname"].(string),
		"--label", Label + "=" + s.ServerID, "--privileged", "--security-opt", "seccomp=unconfined",
		"--security-opt", "apparmor=unconfined", "--tmpfs", "/tmp", "--tmpfs", "/run", "--volume", "/var",
		"--volume", "/lib/modules:/lib/modules:ro", "--network", m.cfg.Network, "--ip", s.FixedIP.String(),
		"--restart", "on-failure:1", "--cgroupns", "private", s.DockerImage}
	if out, err := docker(ctx, nil, args...); err != nil {
		return fmt.Errorf("start the server's container: %w: %s", err, out)
	}
	for _, a := range s.Addresses {
		if err := m.AddAddress(ctx, s.ServerID, a); err != nil {
			return err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	m.stop[s.ServerID] = cancel
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		if err := m.cloudInit(runCtx, name, s); err != nil {
			m.write(s.ServerID, "cloud-init failed: %v\n", err)
			m.log.Warn("cloud-init failed", "server", s.ServerID, "name", s.Name, "err", err)
			return
		}
		m.write(s.ServerID, "cloud-init finished\n")
	}()
	return nil
}

// cloudInit waits for the node's systemd, renders the user data's Jinja variables from the
// metadata, translates it and runs its commands, each retried as CAPD retries them.
func (m *Machines) cloudInit(ctx context.Context, name string, s cloud.MachineSpec) error {
	if err := waitForSystemd(ctx, name); err != nil {
		return err
	}
	data, err := renderJinja(s.UserData, s.Metadata)
	if err != nil {
		return err
	}
	version := s.DockerImage[strings.LastIndex(s.DockerImage, ":")+1:]
	helper := exec.CommandContext(ctx, m.cfg.CloudInitCommands, "--kubernetes-version", version, "--image", s.DockerImage)
	helper.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	helper.Stderr = &stderr
	out, err := helper.Output()
	if err != nil {
		return fmt.Errorf("translate the user data: %w: %s", err, stderr.String())
	}
	var cmds []struct {
		Cmd   string
		Args  []string
		Stdin string
		Retry int
	}
	if err := json.Unmarshal(out, &cmds); err != nil {
		return fmt.Errorf("read the translated user data: %w", err)
	}
	for _, c := range cmds {
		line := strings.Join(append([]string{c.Cmd}, c.Args...), " ")
		for attempt := 0; ; attempt++ {
			m.write(s.ServerID, "+ %s\n", line)
			var stdin *strings.Reader
			if c.Stdin != "" {
				stdin = strings.NewReader(c.Stdin)
			}
			args := []string{"exec"}
			if stdin != nil {
				args = append(args, "--interactive")
			}
			out, err := docker(ctx, stdin, append(append(args, name, c.Cmd), c.Args...)...)
			m.write(s.ServerID, "%s", out)
			if err == nil {
				break
			}
			if attempt >= c.Retry || ctx.Err() != nil {
				return fmt.Errorf("%s: %w", line, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
			}
		}
	}
	return nil
}

func waitForSystemd(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		out, _ := docker(ctx, nil, "exec", name, "systemctl", "is-system-running")
		if state := strings.TrimSpace(out); state == "running" || state == "degraded" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("systemd of %s did not come up: %s", name, strings.TrimSpace(out))
		case <-time.After(time.Second):
		}
	}
}

var jinjaVar = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.]+)\s*\}\}`)

// renderJinja does what cloud-init does with "## template: jinja" user data for the variables a
// Cluster API template uses (v1.instance_id, v1.local_hostname, ds.meta_data.*): replaces them
// with the instance's data. An unknown variable is an error, not a silent blank.
func renderJinja(data []byte, md map[string]any) ([]byte, error) {
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	if strings.TrimSpace(string(first)) != "## template: jinja" {
		return data, nil
	}
	v1 := map[string]any{"instance_id": md["instance_id"], "local_hostname": md["local_hostname"],
		"availability_zone": md["availability_zone"], "cloud_name": "openstack", "platform": "openstack", "region": "RegionOne"}
	var missing []string
	out := jinjaVar.ReplaceAllFunc(rest, func(b []byte) []byte {
		key := string(jinjaVar.FindSubmatch(b)[1])
		var v any
		switch {
		case strings.HasPrefix(key, "v1."):
			v = v1[strings.TrimPrefix(key, "v1.")]
		case strings.HasPrefix(key, "ds.meta_data."):
			v = md[strings.TrimPrefix(key, "ds.meta_data.")]
		}
		if v == nil {
			missing = append(missing, key)
			return b
		}
		return []byte(fmt.Sprint(v))
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("the user data's Jinja template uses %s, which this cloud's instance data does not have", strings.Join(missing, ", "))
	}
	return out, nil
}

// Delete removes the server's container and its volumes.
func (m *Machines) Delete(ctx context.Context, serverID string) error {
	m.mu.Lock()
	if cancel := m.stop[serverID]; cancel != nil {
		cancel()
	}
	m.mu.Unlock()
	out, err := docker(ctx, nil, "ps", "--all", "--quiet", "--filter", "label="+Label+"="+serverID)
	if err != nil {
		return fmt.Errorf("find the server's container: %w: %s", err, out)
	}
	for _, id := range strings.Fields(out) {
		if out, err := docker(ctx, nil, "rm", "--force", "--volumes", id); err != nil {
			return fmt.Errorf("remove the server's container %s: %w: %s", id, err, out)
		}
	}
	m.mu.Lock()
	delete(m.console, serverID)
	delete(m.stop, serverID)
	m.mu.Unlock()
	return nil
}

// Stop kills the server's container and keeps it stopped: Docker does not start it again (its
// restart policy goes first), as a host that failed does not.
func (m *Machines) Stop(ctx context.Context, serverID string) error {
	m.mu.Lock()
	if cancel := m.stop[serverID]; cancel != nil {
		cancel()
	}
	m.mu.Unlock()
	out, err := docker(ctx, nil, "ps", "--quiet", "--filter", "label="+Label+"="+serverID)
	if err != nil || strings.TrimSpace(out) == "" {
		return fmt.Errorf("stop server %s: no running container: %v %s", serverID, err, out)
	}
	for _, id := range strings.Fields(out) {
		for _, args := range [][]string{{"update", "--restart", "no", id}, {"kill", id}} {
			if out, err := docker(ctx, nil, args...); err != nil {
				return fmt.Errorf("stop server %s: docker %s: %w: %s", serverID, args[0], err, out)
			}
		}
	}
	m.write(serverID, "stopped\n")
	return nil
}

// AddAddress puts a floating IP on the container's interface: the test bed's network then
// reaches the server at it, as a cloud's router does with a floating IP.
func (m *Machines) AddAddress(ctx context.Context, serverID string, ip netip.Addr) error {
	return m.address(ctx, serverID, "add", ip)
}

// RemoveAddress takes a floating IP from the container's interface.
func (m *Machines) RemoveAddress(ctx context.Context, serverID string, ip netip.Addr) error {
	return m.address(ctx, serverID, "del", ip)
}

func (m *Machines) address(ctx context.Context, serverID, op string, ip netip.Addr) error {
	out, err := docker(ctx, nil, "ps", "--quiet", "--filter", "label="+Label+"="+serverID)
	if err != nil || strings.TrimSpace(out) == "" {
		return fmt.Errorf("%s address %s: no running container for server %s: %v %s", op, ip, serverID, err, out)
	}
	ctr := strings.Fields(out)[0]
	if out, err := docker(ctx, nil, "exec", ctr, "ip", "address", op, ip.String()+"/32", "dev", "eth0"); err != nil {
		return fmt.Errorf("%s address %s on server %s: %w: %s", op, ip, serverID, err, out)
	}
	m.write(serverID, "address %s: %s\n", op, ip)
	return nil
}

// Console is what the server's boot and cloud-init printed.
func (m *Machines) Console(serverID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.console[serverID]; b != nil {
		return b.String()
	}
	return ""
}

// consoleLimit bounds a console: the last part is what tells why a boot failed.
const consoleLimit = 1 << 20

func (m *Machines) write(serverID, format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.console[serverID]
	if b == nil {
		b = &bytes.Buffer{}
		m.console[serverID] = b
	}
	fmt.Fprintf(b, format, args...)
	if b.Len() > consoleLimit {
		rest := b.Bytes()[b.Len()-consoleLimit/2:]
		m.console[serverID] = bytes.NewBuffer(append([]byte(nil), rest...))
	}
}

func docker(ctx context.Context, stdin *strings.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
