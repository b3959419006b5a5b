package containers

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"time"

	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud"
)

// BalancerLabel marks the containers of load balancers, with the load balancer's ID as value.
const BalancerLabel = "cluster-init.dev/openstack-loadbalancer"

// BalancersConfig says where load balancers run and of what.
type BalancersConfig struct {
	// Network is the Docker network of the load balancers (the servers'); Subnet its IPv4 subnet.
	Network string
	Subnet  netip.Prefix
	// Image is an haproxy image whose entry point runs haproxy in master-worker mode on
	// /usr/local/etc/haproxy/haproxy.cfg and reloads it on SIGHUP: the test bed's
	// kindest/haproxy, which CAPD's load balancers run.
	Image string
	// NamePrefix goes before "lb-" and the load balancer's ID to name its container.
	NamePrefix string
	Logger     *slog.Logger
}

// Balancers runs each load balancer as an haproxy container at its VIP (Octavia's amphora): a
// TCP proxy per listener to its pool's members, with the pool's health monitor as haproxy's
// checks and the listener's allowed CIDRs as its only sources; its floating IPs on the
// container's interface. Use NewBalancers.
type Balancers struct {
	cfg  BalancersConfig
	log  *slog.Logger
	http *http.Client

	mu sync.Mutex
	// vips are the addresses of the load balancers applied, where their health is read.
	vips map[string]netip.Addr
	// addresses are the floating IPs the cloud gave each load balancer: a container made again
	// gets them again.
	addresses map[string]map[netip.Addr]bool
	// locks serialize the changes of one load balancer (its configuration, its addresses).
	locks map[string]*sync.Mutex
}

// lock holds load balancer lbID's lock until the function it returns is called.
func (b *Balancers) lock(lbID string) func() {
	b.mu.Lock()
	l := b.locks[lbID]
	if l == nil {
		l = &sync.Mutex{}
		b.locks[lbID] = l
	}
	b.mu.Unlock()
	l.Lock()
	return l.Unlock
}

var _ cloud.Balancers = (*Balancers)(nil)

// NewBalancers returns the load balancers of cfg.
func NewBalancers(cfg BalancersConfig) (*Balancers, error) {
	if cfg.Network == "" || !cfg.Subnet.IsValid() || cfg.Image == "" {
		return nil, fmt.Errorf("containers: load balancers need a Docker network, its subnet and an haproxy image (got %q, %s, %q)", cfg.Network, cfg.Subnet, cfg.Image)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "openstack-"
	}
	return &Balancers{cfg: cfg, log: cfg.Logger, http: &http.Client{Timeout: 2 * time.Second}, vips: map[string]netip.Addr{},
		addresses: map[string]map[netip.Addr]bool{}, locks: map[string]*sync.Mutex{}}, nil
}

func (b *Balancers) containerName(lbID string) string {
	return b.cfg.NamePrefix + "lb-" + strings.SplitN(lbID, "-", 2)[0]
}

// Apply writes the load balancer's haproxy configuration and starts its container, or has the
// running one reload it, then waits until it serves that configuration. A container started
// (again) gets the load balancer's floating IPs.
func (b *Balancers) Apply(ctx context.Context, spec cloud.BalancerSpec) error {
	if !b.cfg.Subnet.Contains(spec.VIP) {
		return fmt.Errorf("load balancer %s: its VIP %s is outside the Docker network %s (%s): give the cluster a subnet inside it", spec.ID, spec.VIP, b.cfg.Network, b.cfg.Subnet)
	}
	unlock := b.lock(spec.ID)
	defer unlock()
	config, revision := haproxyConfig(spec)
	archive, err := tarOf("haproxy.cfg", config)
	if err != nil {
		return fmt.Errorf("the configuration of load balancer %s: %w", spec.ID, err)
	}
	name := b.containerName(spec.ID)
	state, _ := docker(ctx, nil, "inspect", "--format", "{{.State.Running}}", name)
	state = strings.TrimSpace(state)
	if state == "" || strings.Contains(state, "No such") {
		// No restart: a container that stops is an amphora lost, which health shows (ERROR).
		args := []string{"create", "--name", name, "--label", BalancerLabel + "=" + spec.ID, "--network", b.cfg.Network,
			"--ip", spec.VIP.String(), "--restart", "no", b.cfg.Image}
		if out, err := docker(ctx, nil, args...); err != nil {
			return fmt.Errorf("create the container of load balancer %s: %w: %s", spec.ID, err, out)
		}
	}
	if out, err := docker(ctx, strings.NewReader(archive), "cp", "-", name+":/usr/local/etc/haproxy/"); err != nil {
		return fmt.Errorf("write the configuration of load balancer %s: %w: %s", spec.ID, err, out)
	}
	step := []string{"kill", "--signal", "HUP", name}
	if state != "true" {
		step = []string{"start", name}
	}
	if out, err := docker(ctx, nil, step...); err != nil {
		return fmt.Errorf("%s the container of load balancer %s: %w: %s", step[0], spec.ID, err, out)
	}
	b.mu.Lock()
	b.vips[spec.ID] = spec.VIP
	if b.addresses[spec.ID] == nil {
		b.addresses[spec.ID] = map[netip.Addr]bool{}
		for _, a := range spec.Addresses {
			b.addresses[spec.ID][a] = true
		}
	}
	var addrs []netip.Addr
	for a := range b.addresses[spec.ID] {
		addrs = append(addrs, a)
	}
	b.mu.Unlock()
	if state != "true" {
		for _, a := range addrs {
			if err := b.address(ctx, spec.ID, "replace", a); err != nil {
				return err
			}
		}
	}
	return b.waitServing(ctx, spec, revision)
}

// waitServing waits until the load balancer's statistics show the configuration of revision
// (its stats frontend is named after it): haproxy reloads in the background.
func (b *Balancers) waitServing(ctx context.Context, spec cloud.BalancerSpec, revision string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		rows, err := b.stats(ctx, spec.VIP)
		if err == nil {
			for _, r := range rows {
				if r.proxy == "stats-"+revision {
					return nil
				}
			}
			err = fmt.Errorf("it still serves an older configuration")
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("load balancer %s at %s does not serve its configuration: %v", spec.ID, spec.VIP, last)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Delete removes the load balancer's container.
func (b *Balancers) Delete(ctx context.Context, lbID string) error {
	out, err := docker(ctx, nil, "ps", "--all", "--quiet", "--filter", "label="+BalancerLabel+"="+lbID)
	if err != nil {
		return fmt.Errorf("find the container of load balancer %s: %w: %s", lbID, err, out)
	}
	for _, id := range strings.Fields(out) {
		if out, err := docker(ctx, nil, "rm", "--force", "--volumes", id); err != nil {
			return fmt.Errorf("remove the container of load balancer %s: %w: %s", lbID, err, out)
		}
	}
	b.mu.Lock()
	delete(b.vips, lbID)
	delete(b.addresses, lbID)
	b.mu.Unlock()
	return nil
}

// AddAddress puts a floating IP on the load balancer's interface (when its container runs; else
// when Apply starts it).
func (b *Balancers) AddAddress(ctx context.Context, lbID string, ip netip.Addr) error {
	return b.changeAddress(ctx, lbID, ip, true)
}

// RemoveAddress takes a floating IP from the load balancer's interface.
func (b *Balancers) RemoveAddress(ctx context.Context, lbID string, ip netip.Addr) error {
	return b.changeAddress(ctx, lbID, ip, false)
}

func (b *Balancers) changeAddress(ctx context.Context, lbID string, ip netip.Addr, add bool) error {
	unlock := b.lock(lbID)
	defer unlock()
	b.mu.Lock()
	if b.addresses[lbID] == nil {
		b.addresses[lbID] = map[netip.Addr]bool{}
	}
	had := b.addresses[lbID][ip]
	if add {
		b.addresses[lbID][ip] = true
	} else {
		delete(b.addresses[lbID], ip)
	}
	b.mu.Unlock()
	running, _ := docker(ctx, nil, "inspect", "--format", "{{.State.Running}}", b.containerName(lbID))
	switch {
	case strings.TrimSpace(running) != "true":
		return nil // Apply gives a container it starts the addresses it has then
	case add:
		return b.address(ctx, lbID, "replace", ip)
	case had:
		return b.address(ctx, lbID, "del", ip)
	}
	return nil
}

// address changes an address of the container's interface from this host, in the container's
// network namespace: the haproxy image has no ip command of its own.
func (b *Balancers) address(ctx context.Context, lbID, op string, ip netip.Addr) error {
	pid, err := docker(ctx, nil, "inspect", "--format", "{{.State.Pid}}", b.containerName(lbID))
	pid = strings.TrimSpace(pid)
	if err != nil || pid == "" || pid == "0" {
		return fmt.Errorf("%s address %s: load balancer %s runs no container: %v %s", op, ip, lbID, err, pid)
	}
	if out, err := run(ctx, "nsenter", "--target", pid, "--net", "ip", "address", op, ip.String()+"/32", "dev", "eth0"); err != nil {
		return fmt.Errorf("%s address %s on load balancer %s: %w: %s", op, ip, lbID, err, out)
	}
	return nil
}

// Health reads haproxy's view of the members: UP, DOWN, or "" while unchecked.
func (b *Balancers) Health(ctx context.Context, lbID string) (map[string]string, error) {
	b.mu.Lock()
	vip, ok := b.vips[lbID]
	b.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("load balancer %s has not been applied", lbID)
	}
	rows, err := b.stats(ctx, vip)
	if err != nil {
		return nil, fmt.Errorf("the health of load balancer %s: %w", lbID, err)
	}
	out := map[string]string{}
	for _, r := range rows {
		id, isMember := strings.CutPrefix(r.server, "member-")
		if !isMember {
			continue
		}
		switch {
		case strings.HasPrefix(r.status, "UP"):
			out[id] = "UP"
		case strings.HasPrefix(r.status, "DOWN"):
			out[id] = "DOWN"
		default: // "no check", "MAINT", a transition not settled
			out[id] = ""
		}
	}
	return out, nil
}

type statRow struct{ proxy, server, status string }

// stats reads haproxy's statistics as CSV from its stats frontend.
func (b *Balancers) stats(ctx context.Context, vip netip.Addr) ([]statRow, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/;csv", netip.AddrPortFrom(vip, cloud.HaproxyStatsPort)), nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("haproxy statistics: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(body, []byte("# "))))
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil || len(records) == 0 {
		return nil, fmt.Errorf("haproxy statistics: %v", err)
	}
	col := map[string]int{}
	for i, h := range records[0] {
		col[h] = i
	}
	var out []statRow
	for _, rec := range records[1:] {
		if len(rec) > col["status"] {
			out = append(out, statRow{proxy: rec[col["pxname"]], server: rec[col["svname"]], status: rec[col["status"]]})
		}
	}
	return out, nil
}

// haproxyConfig is the load balancer's configuration and its revision (a hash of it), which
// names its stats frontend so that a reload can be seen to have taken.
func haproxyConfig(spec cloud.BalancerSpec) (config, revision string) {
	var body strings.Builder
	for _, l := range spec.Listeners {
		fmt.Fprintf(&body, "\nfrontend listener-%s\n  bind 0.0.0.0:%d\n", l.ID, l.Port)
		if len(l.AllowedCIDRs) > 0 {
			fmt.Fprintf(&body, "  tcp-request connection reject unless { src %s }\n", strings.Join(l.AllowedCIDRs, " "))
		}
		if l.PoolID == "" {
			body.WriteString("  tcp-request connection reject\n")
			continue
		}
		fmt.Fprintf(&body, "  default_backend pool-%s\n\nbackend pool-%s\n  balance roundrobin\n", l.PoolID, l.PoolID)
		check := ""
		if m := l.Monitor; m != nil {
			fmt.Fprintf(&body, "  timeout check %ds\n  default-server inter %ds fall %d rise %d\n", m.Timeout, m.Delay, max(1, m.MaxRetriesDown), max(1, m.MaxRetries))
			check = " check"
		}
		for _, m := range l.Members {
			fmt.Fprintf(&body, "  server member-%s %s%s\n", m.ID, netip.AddrPortFrom(m.Address, uint16(m.Port)), check)
		}
	}
	sum := sha256.Sum256([]byte(body.String()))
	revision = fmt.Sprintf("%x", sum[:6])
	// Octavia's default timeouts of a listener's client and member data: 50 s.
	config = fmt.Sprintf(`# Load balancer %s (%s) of the simulated cloud, revision %s.
global
  maxconn 4096

defaults
  mode tcp
  timeout connect 5s
  timeout client 50s
  timeout server 50s

frontend stats-%s
  mode http
  bind 0.0.0.0:%d
  stats enable
  stats uri /
%s`, spec.ID, spec.Name, revision, revision, cloud.HaproxyStatsPort, body.String())
	return config, revision
}

func tarOf(name, content string) (string, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: time.Now()}); err != nil {
		return "", err
	}
	if _, err := tw.Write([]byte(content)); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
