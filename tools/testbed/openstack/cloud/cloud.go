// Package cloud is an OpenStack cloud for the test bed: the parts of Keystone, Nova, Neutron and
// Glance that Cluster API Provider OpenStack (CAPO) and its resource controller (ORC) call, with
// the behaviour they rely on (list filters, tags, conflicts, errors in OpenStack's shapes). A
// server is handed to a Machines implementation, which makes it real (a Docker container that
// runs the server's cloud-init user data, see package containers). An admin API, on a listener
// of its own, injects faults and shows what was called and what exists.
package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Config is what the cloud starts with.
type Config struct {
	// PublicURL is how clients reach the API (the catalog's endpoints are under it).
	PublicURL string
	Region    string
	// Domain, Project and User with Password, and an application credential of that user on that
	// project: the credentials the cloud accepts.
	Domain, Project, User, Password string
	ApplicationCredentialID         string
	ApplicationCredentialSecret     string
	// ExternalNetwork is the provider network floating IPs and router gateways come from.
	ExternalNetwork ExternalNetwork
	// Images are Glance's images, each the Docker image its servers run.
	Images []Image
	// KeyPairs are the Nova key pairs that exist (servers may name them).
	KeyPairs []string
	// AvailabilityZones are Nova's zones, the first one where a server that names none goes
	// (default: nova). CAPO makes a failure domain of each.
	AvailabilityZones []string
	// Machines makes servers real; nil keeps them as records only (every server boots at once).
	Machines Machines
	// Balancers makes load balancers real; nil keeps them as records only (every change is
	// applied at once, every member without health).
	Balancers Balancers
	Logger    *slog.Logger
}

// ExternalNetwork is the cloud's external network and the subnet its addresses come from.
type ExternalNetwork struct {
	ID, Name string
	CIDR     netip.Prefix
	// Pool is the range floating IPs and router gateways are taken from.
	PoolStart, PoolEnd netip.Addr
}

// Image is one Glance image and what its servers run.
type Image struct {
	ID, Name    string
	DockerImage string
}

// Machines makes servers real. Boot returns once the server runs (Nova's ACTIVE); what the server
// does then (its cloud-init) goes on in the background and is written to its console.
type Machines interface {
	Boot(ctx context.Context, s MachineSpec) error
	Delete(ctx context.Context, serverID string) error
	// AddAddress and RemoveAddress give a running server a floating IP, or take it away.
	AddAddress(ctx context.Context, serverID string, ip netip.Addr) error
	RemoveAddress(ctx context.Context, serverID string, ip netip.Addr) error
	// Stop stops a running server at once, for good (its host failed, or its guest powered off).
	Stop(ctx context.Context, serverID string) error
	// Console is what the server printed so far (os-getConsoleOutput).
	Console(serverID string) string
}

// MachineSpec is a server as a machine sees it.
type MachineSpec struct {
	ServerID, Name string
	DockerImage    string
	FixedIP        netip.Addr
	// UserData is the server's user data, decoded; Metadata is what its metadata service holds
	// (instance_id, local_hostname, name, availability_zone, meta).
	UserData []byte
	Metadata map[string]any
	// Addresses are floating IPs associated before the server ran.
	Addresses []netip.Addr
}

// Cloud is the simulated cloud. Its zero value is not usable: use New.
type Cloud struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// tokens maps an issued token to its scope.
	tokens                      map[string]tokenInfo
	projectID, userID, domainID string

	flavors, servers, keypairs                    *table
	networks, subnets, ports, secGroups, secRules *table
	routers, floatingIPs                          *table
	images                                        *table
	// Octavia's.
	loadBalancers, listeners, pools, monitors, members *table

	faults faults
	// faultsCleared is closed by ClearFaults: what a fault holds (a load balancer stuck for
	// ever) goes on then.
	faultsCleared chan struct{}
	calls         map[string]int
	// booting are the boots still going, so that a delete stops one and waits for it.
	booting map[string]booting
	// closed: the cloud is shutting down and starts nothing more in the background.
	closed bool
	booted sync.WaitGroup
}

type booting struct {
	cancel context.CancelFunc
	done   chan struct{}
}

type tokenInfo struct {
	expires time.Time
	method  string
}

// New makes a cloud with the external network, flavors, images and key pairs of cfg.
func New(cfg Config) (*Cloud, error) {
	if cfg.PublicURL == "" {
		return nil, fmt.Errorf("new cloud: PublicURL is empty")
	}
	cfg.PublicURL = strings.TrimSuffix(cfg.PublicURL, "/")
	if cfg.Region == "" {
		cfg.Region = "RegionOne"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.AvailabilityZones) == 0 {
		cfg.AvailabilityZones = []string{"nova"}
	}
	if !cfg.ExternalNetwork.CIDR.IsValid() || !cfg.ExternalNetwork.CIDR.Contains(cfg.ExternalNetwork.PoolStart) ||
		!cfg.ExternalNetwork.CIDR.Contains(cfg.ExternalNetwork.PoolEnd) {
		return nil, fmt.Errorf("new cloud: external network %s: pool %s-%s is not inside it",
			cfg.ExternalNetwork.CIDR, cfg.ExternalNetwork.PoolStart, cfg.ExternalNetwork.PoolEnd)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cloud{
		cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		tokens:  map[string]tokenInfo{},
		flavors: newTable(), servers: newTable(), keypairs: newTable(),
		networks: newTable(), subnets: newTable(), ports: newTable(), secGroups: newTable(), secRules: newTable(),
		routers: newTable(), floatingIPs: newTable(), images: newTable(),
		loadBalancers: newTable(), listeners: newTable(), pools: newTable(), monitors: newTable(), members: newTable(),
		calls: map[string]int{}, booting: map[string]booting{}, faultsCleared: make(chan struct{}),
	}
	c.projectID, c.userID, c.domainID = newID(), newID(), "default"
	c.seed()
	if c.cfg.Balancers != nil {
		c.booted.Add(1)
		go c.watchHealth(2 * time.Second)
	}
	return c, nil
}

// Close stops what the cloud runs in the background (boots, slow boots) and waits for it.
func (c *Cloud) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.booted.Wait()
}

// ProjectID is the ID of the cloud's one project.
func (c *Cloud) ProjectID() string { return c.projectID }

func (c *Cloud) seed() {
	for i, f := range []struct {
		name            string
		vcpus, ram, gib int
	}{{"m1.small", 1, 2048, 20}, {"m1.medium", 2, 4096, 40}, {"m1.large", 4, 8192, 80}, {"m1.xlarge", 8, 16384, 160}} {
		id := fmt.Sprint(i + 1)
		c.flavors.put(object{
			"id": id, "name": f.name, "vcpus": f.vcpus, "ram": f.ram, "disk": f.gib, "swap": "",
			"OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": false, "rxtx_factor": 1.0,
			"os-flavor-access:is_public": true, "description": nil, "extra_specs": map[string]any{},
			"links": c.links("compute/v2.1/flavors/" + id),
		})
	}
	for _, name := range c.cfg.KeyPairs {
		c.keypairs.put(object{"id": name, "name": name, "type": "ssh", "public_key": "ssh-ed25519 AAAA" + name,
			"fingerprint": "00:00", "user_id": c.userID})
	}
	now := stamp()
	for _, img := range c.cfg.Images {
		if img.ID == "" {
			img.ID = newID()
		}
		c.images.put(object{
			"id": img.ID, "name": img.Name, "status": "active", "visibility": "public", "protected": false,
			"disk_format": "raw", "container_format": "bare", "size": 1 << 30, "min_disk": 0, "min_ram": 0,
			"tags": []string{}, "owner": c.projectID, "created_at": now, "updated_at": now,
			"os_hidden": false, "self": "/v2/images/" + img.ID, "file": "/v2/images/" + img.ID + "/file",
			"schema": "/v2/schemas/image", "docker_image": img.DockerImage,
		})
	}
	ext := c.cfg.ExternalNetwork
	if ext.ID == "" {
		ext.ID = newID()
		c.cfg.ExternalNetwork.ID = ext.ID
	}
	if ext.Name == "" {
		ext.Name = "public"
	}
	subnetID := newID()
	c.networks.put(c.networkObject(ext.ID, ext.Name, true, []string{subnetID}, "admin"))
	c.subnets.put(object{
		"id": subnetID, "name": ext.Name + "-subnet", "network_id": ext.ID, "cidr": ext.CIDR.String(), "ip_version": 4,
		"gateway_ip": ext.CIDR.Addr().Next().String(), "enable_dhcp": false, "dns_nameservers": []string{},
		"allocation_pools": []any{map[string]any{"start": ext.PoolStart.String(), "end": ext.PoolEnd.String()}},
		"host_routes":      []any{}, "tags": []string{}, "project_id": "admin", "tenant_id": "admin", "description": "",
		"subnetpool_id": nil, "ipv6_address_mode": nil, "ipv6_ra_mode": nil, "service_types": []string{},
		"created_at": stamp(), "updated_at": stamp(), "revision_number": 0,
	})
	// Every project has a default security group, as Neutron makes on first use.
	c.createSecurityGroup("default", "Default security group")
}

// ExternalNetworkID is the ID of the external network (generated when the config gave none).
func (c *Cloud) ExternalNetworkID() string { return c.cfg.ExternalNetwork.ID }

func (c *Cloud) links(path string) []any {
	return []any{map[string]any{"rel": "self", "href": c.cfg.PublicURL + "/" + path}}
}

func stamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05Z") }

// Handler serves the OpenStack APIs: /identity, /compute, /network, /image, /load-balancer.
func (c *Cloud) Handler() http.Handler {
	mux := http.NewServeMux()
	c.identityRoutes(mux)
	c.computeRoutes(mux)
	c.networkRoutes(mux)
	c.imageRoutes(mux)
	c.loadBalancerRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"code": 404, "title": "Not Found", "message": "The resource could not be found: " + r.Method + " " + r.URL.Path}})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		service := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)[0]
		c.mu.Lock()
		c.calls[pattern]++
		down := c.faults.unavailable(service)
		if down {
			c.calls["503 "+service]++
		}
		c.mu.Unlock()
		if pattern == "/" {
			c.log.Warn("call the cloud does not know", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery)
		} else {
			c.log.Debug("call", "pattern", pattern, "query", r.URL.RawQuery)
		}
		if down {
			// What a cloud's API gateway answers while a service is down: CAPO retries on it.
			w.Header().Set("Retry-After", "5")
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("<html><body><h1>503 Service Unavailable</h1>No server is available to handle this request.</body></html>\n"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Calls is how many times each API route was called, by its route pattern, how many calls each
// service refused with 503 while a fault had it down ("503 compute"), and how many tokens were
// issued by each method ("token by password", "token by application_credential").
func (c *Cloud) Calls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// authorized reports whether the request carries a token the cloud issued; when it does not it
// has answered 401 as Keystone's middleware does.
func (c *Cloud) authorized(w http.ResponseWriter, r *http.Request) bool {
	token := r.Header.Get("X-Auth-Token")
	c.mu.Lock()
	info, ok := c.tokens[token]
	c.mu.Unlock()
	if !ok || time.Now().After(info.expires) {
		w.Header().Set("WWW-Authenticate", "Keystone uri=\""+c.cfg.PublicURL+"/identity\"")
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
			"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}})
		return false
	}
	return true
}

// guarded wraps a handler that needs a token.
func (c *Cloud) guarded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.authorized(w, r) {
			h(w, r)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body into v; on failure it has answered 400 in the service's shape.
func decode(w http.ResponseWriter, r *http.Request, v any, fail func(w http.ResponseWriter, status int, msg string)) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		fail(w, http.StatusBadRequest, "Malformed request body: "+err.Error())
		return false
	}
	return true
}
