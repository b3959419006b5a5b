// Package simulator runs the test bed's OpenStack cloud: the cloud's APIs on the Docker
// network's gateway (where kind's pods and the servers reach this host), its admin API on the
// loopback, servers as containers, and a clouds.yaml with an application credential for it.
// `tools/testbed/openstack serve` and the end-to-end tests start it the same way.
package simulator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud"
	"cluster-init.dev/cluster-init/tools/testbed/openstack/containers"
)

// The test bed's fixed choices: its clusters' values name them (tools/testbed/openstack/README.md).
const (
	// ExternalNetworkID is the ID of the cloud's external network.
	ExternalNetworkID = "9d4c2f3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
	// CloudName is the cloud's name in the clouds.yaml written.
	CloudName = "testbed"
	// KeyPair is the Nova key pair that exists.
	KeyPair = "testbed"
	// Project is the cloud's one project, User its one user (with a password and an application
	// credential).
	Project = "cluster-init"
	User    = "cluster-init"
	// FloatingRange is where floating IPs come from: inside the Docker network, far from the
	// addresses Docker hands out from its start.
	FloatingRange = "172.18.201.1-172.18.201.254"
)

// Options configure a simulator.
type Options struct {
	// Network is the Docker network of the servers (kind's).
	Network string
	// Port of the OpenStack APIs on the network's gateway (0: any); AdminAddress is the admin
	// API's listen address (loopback).
	Port         int
	AdminAddress string
	// Images maps Glance image names to the Docker images their servers run.
	Images map[string]string
	// CloudInitCommands is the helper's path (BuildHelper makes it).
	CloudInitCommands string
	// LoadBalancerImage is the haproxy image of Octavia's load balancers (the test bed's
	// kindest/haproxy, LoadBalancerImage finds it); empty: Octavia keeps them as records only.
	LoadBalancerImage string
	Logger            *slog.Logger
}

// AvailabilityZones are Nova's zones: CAPO makes a failure domain of each, and spreads a control
// plane over them.
func AvailabilityZones() []string { return []string{"az-1", "az-2", "az-3"} }

// Simulator is a running cloud.
type Simulator struct {
	Cloud    *cloud.Cloud
	Machines *containers.Machines
	// URL of the APIs (identity at URL/identity/v3), AdminURL of the admin API.
	URL, AdminURL string
	// ApplicationCredentialID and ApplicationCredentialSecret are accepted by the identity API.
	ApplicationCredentialID, ApplicationCredentialSecret string
	// Password is the password of the cloud's user (User, of the project Project).
	Password string
	servers  []*http.Server
}

// Start runs the simulator until Close.
func Start(opts Options) (*Simulator, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	gateway, subnet, err := dockerNetwork(opts.Network)
	if err != nil {
		return nil, err
	}
	start, end, _ := strings.Cut(FloatingRange, "-")
	pool := [2]netip.Addr{netip.MustParseAddr(start), netip.MustParseAddr(end)}
	if !subnet.Contains(pool[0]) || !subnet.Contains(pool[1]) {
		return nil, fmt.Errorf("the floating IP range %s is outside the Docker network %s (%s)", FloatingRange, opts.Network, subnet)
	}
	api, err := net.Listen("tcp", net.JoinHostPort(gateway.String(), fmt.Sprint(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("listen on the network's gateway for the cloud's APIs: %w", err)
	}
	if opts.AdminAddress == "" {
		opts.AdminAddress = "127.0.0.1:0"
	}
	// The admin API has no authentication: it injects faults and lists what exists.
	if host, _, err := net.SplitHostPort(opts.AdminAddress); err != nil || !isLoopback(host) {
		return nil, fmt.Errorf("admin address %q: expected a loopback address (127.0.0.1:PORT), the admin API has no authentication", opts.AdminAddress)
	}
	admin, err := net.Listen("tcp", opts.AdminAddress)
	if err != nil {
		api.Close()
		return nil, fmt.Errorf("listen for the admin API: %w", err)
	}
	machines, err := containers.New(containers.Config{Network: opts.Network, Subnet: subnet,
		CloudInitCommands: opts.CloudInitCommands, Logger: opts.Logger})
	if err != nil {
		api.Close()
		admin.Close()
		return nil, err
	}
	var balancers cloud.Balancers
	if opts.LoadBalancerImage != "" {
		if balancers, err = containers.NewBalancers(containers.BalancersConfig{Network: opts.Network, Subnet: subnet,
			Image: opts.LoadBalancerImage, Logger: opts.Logger}); err != nil {
			api.Close()
			admin.Close()
			return nil, err
		}
	}
	var images []cloud.Image
	for name, ref := range opts.Images {
		images = append(images, cloud.Image{Name: name, DockerImage: ref})
	}
	s := &Simulator{URL: "http://" + api.Addr().String(), AdminURL: "http://" + admin.Addr().String(), Machines: machines,
		ApplicationCredentialID: "testbed-" + random(4), ApplicationCredentialSecret: random(24), Password: random(24)}
	s.Cloud, err = cloud.New(cloud.Config{
		PublicURL: s.URL, Domain: "Default", Project: Project, User: User, Password: s.Password,
		ApplicationCredentialID: s.ApplicationCredentialID, ApplicationCredentialSecret: s.ApplicationCredentialSecret,
		ExternalNetwork: cloud.ExternalNetwork{ID: ExternalNetworkID, Name: "public", CIDR: subnet, PoolStart: pool[0], PoolEnd: pool[1]},
		Images:          images, KeyPairs: []string{KeyPair}, AvailabilityZones: AvailabilityZones(),
		Machines: machines, Balancers: balancers, Logger: opts.Logger,
	})
	if err != nil {
		api.Close()
		admin.Close()
		return nil, err
	}
	for l, h := range map[net.Listener]http.Handler{api: s.Cloud.Handler(), admin: s.Cloud.AdminHandler()} {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		s.servers = append(s.servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				opts.Logger.Error("serve", "address", l.Addr(), "err", err)
			}
		}()
	}
	return s, nil
}

// Close stops serving. The servers' and load balancers' containers stay: RemoveServers removes
// them.
func (s *Simulator) Close() {
	for _, srv := range s.servers {
		_ = srv.Close()
	}
	s.Cloud.Close()
	s.Machines.Close()
}

// CloudsYAML is a clouds.yaml for the cloud, with the application credential.
func (s *Simulator) CloudsYAML() string {
	return s.cloudsYAML(CloudName, "v3applicationcredential",
		"application_credential_id: "+s.ApplicationCredentialID, "application_credential_secret: "+s.ApplicationCredentialSecret)
}

// PasswordCloudsYAML is a clouds.yaml for the cloud, named cloudName, with the user's password:
// other credentials than CloudsYAML's, as a tenant's clusters may be given.
func (s *Simulator) PasswordCloudsYAML(cloudName string) string {
	return s.cloudsYAML(cloudName, "password", "username: "+User, "password: "+s.Password, "project_name: "+Project,
		"user_domain_name: Default", "project_domain_name: Default")
}

// cloudsYAML is a clouds.yaml of one cloud, name, authenticating by authType with the auth lines.
func (s *Simulator) cloudsYAML(name, authType string, auth ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "clouds:\n  %s:\n    auth:\n      auth_url: %s/identity/v3\n", name, s.URL)
	for _, l := range auth {
		b.WriteString("      " + l + "\n")
	}
	fmt.Fprintf(&b, "    region_name: RegionOne\n    interface: public\n    identity_api_version: 3\n    auth_type: %s\n", authType)
	return b.String()
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func random(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("read random bytes: %v", err))
	}
	return hex.EncodeToString(b)
}

// dockerNetwork is the IPv4 gateway and subnet of a Docker network.
func dockerNetwork(name string) (netip.Addr, netip.Prefix, error) {
	out, err := exec.Command("docker", "network", "inspect", name).Output()
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, fmt.Errorf("inspect the Docker network %s: %w", name, err)
	}
	return ipv4Of(name, out)
}

// ipv4Of reads the IPv4 gateway and subnet of a network from `docker network inspect`. An engine
// lists no gateway for a subnet given by hand without one: it is then the subnet's first address,
// the one Docker gives the bridge.
func ipv4Of(name string, inspect []byte) (netip.Addr, netip.Prefix, error) {
	var nets []struct {
		IPAM struct {
			Config []struct{ Subnet, Gateway string }
		}
	}
	if err := json.Unmarshal(inspect, &nets); err != nil || len(nets) == 0 {
		return netip.Addr{}, netip.Prefix{}, fmt.Errorf("read the Docker network %s: %v", name, err)
	}
	for _, c := range nets[0].IPAM.Config {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		if c.Gateway == "" {
			return p.Masked().Addr().Next(), p, nil
		}
		if g, err := netip.ParseAddr(c.Gateway); err == nil {
			return g, p, nil
		}
	}
	return netip.Addr{}, netip.Prefix{}, fmt.Errorf("the Docker network %s has no IPv4 subnet", name)
}

// BuildHelper builds the cloudinit-commands helper of the checkout at repo into dir and returns
// its path (Go's build cache makes a second build quick).
func BuildHelper(ctx context.Context, repo, dir string) (string, error) {
	out := filepath.Join(dir, "cloudinit-commands")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(repo, "tools", "testbed", "openstack", "cloudinit")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the cloudinit-commands helper: %w: %s", err, msg)
	}
	return out, nil
}

// LoadBalancerImage is the test bed's haproxy image, kindest/haproxy: the one tag of it the test
// bed builds (CAPD's), as this Docker engine holds it.
func LoadBalancerImage(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "kindest/haproxy").Output()
	if err != nil {
		return "", fmt.Errorf("list the haproxy images: %w", err)
	}
	for _, ref := range strings.Fields(string(out)) {
		if !strings.HasSuffix(ref, ":<none>") {
			return ref, nil
		}
	}
	return "", fmt.Errorf("no kindest/haproxy image: the test bed builds it (tools/testbed/build-images)")
}

// RemoveServers removes every container of a server or a load balancer of any simulated cloud,
// with its volumes.
func RemoveServers(ctx context.Context) error {
	var ids []string
	for _, label := range []string{containers.Label, containers.BalancerLabel} {
		out, err := exec.CommandContext(ctx, "docker", "ps", "--all", "--quiet", "--filter", "label="+label).Output()
		if err != nil {
			return fmt.Errorf("list the servers' and load balancers' containers: %w", err)
		}
		ids = append(ids, strings.Fields(string(out))...)
	}
	if len(ids) == 0 {
		return nil
	}
	if msg, err := exec.CommandContext(ctx, "docker", append([]string{"rm", "--force", "--volumes"}, ids...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("remove the servers' containers: %w: %s", err, msg)
	}
	return nil
}
