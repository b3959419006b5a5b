package cloud

import (
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// faults are what the admin API injected.
type faults struct {
	// quotas limit how many of a resource the project may hold (Nova "instances", Neutron
	// "port", "floatingip", "security_group", …).
	quotas map[string]int
	// serverErrors: a server whose name matches goes to ERROR with this fault message.
	serverErrors []serverErrorFault
	// down: a service answers 503 until then.
	down map[string]time.Time
	// bootDelay: how long servers stay in BUILD before their machine starts.
	bootDelay time.Duration
	// loadBalancers: a load balancer whose name matches stays in PENDING_CREATE, or goes to ERROR.
	loadBalancers []loadBalancerFaultRule
}

// loadBalancerFault is what happens to one new load balancer: kind "stuck" (in PENDING_CREATE,
// for stuckFor or, when 0, for ever: Octavia lets no one delete it then) or "error"; "" nothing.
type loadBalancerFault struct {
	kind     string
	stuckFor time.Duration
}

type loadBalancerFaultRule struct {
	name  *regexp.Regexp
	fault loadBalancerFault
	// remaining is how many more load balancers it hits (0: every matching one).
	remaining int
}

func (f *faults) loadBalancerFault(name string) loadBalancerFault {
	for i := range f.loadBalancers {
		r := &f.loadBalancers[i]
		if !r.name.MatchString(name) || r.remaining < 0 {
			continue
		}
		if r.remaining > 0 {
			r.remaining--
			if r.remaining == 0 {
				r.remaining = -1
			}
		}
		return r.fault
	}
	return loadBalancerFault{}
}

type serverErrorFault struct {
	name    *regexp.Regexp
	message string
	// remaining is how many more servers fail (0: every matching one).
	remaining int
}

func (f *faults) overQuota(resource string, used int) *apiError {
	limit, ok := f.quotas[resource]
	if !ok || limit < 0 || used < limit {
		return nil
	}
	return conflict("OverQuota", fmt.Sprintf("Quota exceeded for resources: ['%s'].", resource))
}

func (f *faults) serverFailure(name string) string {
	for i := range f.serverErrors {
		e := &f.serverErrors[i]
		if !e.name.MatchString(name) {
			continue
		}
		if e.remaining > 0 {
			e.remaining--
			if e.remaining == 0 {
				e.remaining = -1
			}
		} else if e.remaining < 0 {
			continue
		}
		return e.message
	}
	return ""
}

func (f *faults) unavailable(service string) bool {
	until, ok := f.down[service]
	return ok && time.Now().Before(until)
}

// Fault is one fault to inject, as the admin API takes it.
type Fault struct {
	// Kind is quota, server-error, unavailable, slow-boot, load-balancer-stuck,
	// load-balancer-error or server-state.
	Kind string `json:"kind"`
	// Resource and Limit: quota (Limit -1 lifts it).
	Resource string `json:"resource,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	// Name (a regular expression on server names), Message and Count (0: every one): server-error;
	// on load balancer names: load-balancer-stuck, load-balancer-error; the name or ID of one
	// running server, and its new Status (SHUTOFF or ERROR, with Message as Nova's fault): server-state.
	Name    string `json:"name,omitempty"`
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Count   int    `json:"count,omitempty"`
	// Service (identity, compute, network, image) and For: unavailable.
	Service string `json:"service,omitempty"`
	// For: how long a service is down (unavailable), how long a boot takes (slow-boot), how long
	// a load balancer stays in PENDING_CREATE (load-balancer-stuck; empty: for ever).
	For string `json:"for,omitempty"`
}

// Inject adds a fault.
func (c *Cloud) Inject(f Fault) error {
	if f.Kind == "server-state" {
		// It acts on a server now, and on its machine outside the lock.
		return c.setServerState(f.Name, f.Status, f.Message)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch f.Kind {
	case "load-balancer-stuck", "load-balancer-error":
		re, err := regexp.Compile(f.Name)
		if err != nil {
			return fmt.Errorf("fault %s: name %q: %w", f.Kind, f.Name, err)
		}
		lf := loadBalancerFault{kind: "error"}
		if f.Kind == "load-balancer-stuck" {
			lf.kind = "stuck"
			if f.For != "" {
				if lf.stuckFor, err = time.ParseDuration(f.For); err != nil || lf.stuckFor <= 0 {
					return fmt.Errorf("fault load-balancer-stuck: for %q: expected a duration such as 90s, or none (for ever)", f.For)
				}
			}
		}
		c.faults.loadBalancers = append(c.faults.loadBalancers, loadBalancerFaultRule{name: re, fault: lf, remaining: f.Count})
	case "quota":
		if f.Resource == "" {
			return fmt.Errorf("fault quota: resource is empty, expected instances, port, floatingip, security_group, …")
		}
		if c.faults.quotas == nil {
			c.faults.quotas = map[string]int{}
		}
		c.faults.quotas[f.Resource] = f.Limit
	case "server-error":
		re, err := regexp.Compile(f.Name)
		if err != nil {
			return fmt.Errorf("fault server-error: name %q: %w", f.Name, err)
		}
		msg := f.Message
		if msg == "" {
			msg = "No valid host was found. There are not enough hosts available."
		}
		c.faults.serverErrors = append(c.faults.serverErrors, serverErrorFault{name: re, message: msg, remaining: f.Count})
	case "unavailable":
		d, err := time.ParseDuration(f.For)
		if err != nil || d <= 0 {
			return fmt.Errorf("fault unavailable: for %q: expected a duration such as 90s", f.For)
		}
		switch f.Service {
		case "identity", "compute", "network", "image", "load-balancer":
		default:
			return fmt.Errorf("fault unavailable: service %q, expected identity, compute, network, image or load-balancer", f.Service)
		}
		if c.faults.down == nil {
			c.faults.down = map[string]time.Time{}
		}
		c.faults.down[f.Service] = time.Now().Add(d)
	case "slow-boot":
		d, err := time.ParseDuration(f.For)
		if err != nil || d < 0 {
			return fmt.Errorf("fault slow-boot: for %q: expected a duration such as 90s", f.For)
		}
		c.faults.bootDelay = d
	default:
		return fmt.Errorf("fault kind %q, expected quota, server-error, unavailable, slow-boot, load-balancer-stuck, load-balancer-error or server-state", f.Kind)
	}
	c.log.Info("fault injected", "kind", f.Kind, "resource", f.Resource, "limit", f.Limit, "name", f.Name, "service", f.Service, "for", f.For)
	return nil
}

// ClearFaults removes every fault; a load balancer stuck by one goes on.
func (c *Cloud) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = faults{}
	close(c.faultsCleared)
	c.faultsCleared = make(chan struct{})
}

// Resource is one resource the project holds, as the admin API lists it.
type Resource struct {
	Kind, ID, Name string
	// Detail: a server's status and fault, a port's addresses, a floating IP's address.
	Detail string `json:",omitempty"`
}

// Resources are what the project holds: servers, ports, floating IPs, routers, networks,
// subnets and security groups (its default group and the external network are the cloud's and
// are left out), load balancers, listeners, pools, health monitors and members.
func (c *Cloud) Resources() []Resource {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Resource
	for _, s := range c.servers.all() {
		d := s.str("status")
		if f, ok := s["fault"].(map[string]any); ok {
			d += ": " + fmt.Sprint(f["message"])
		}
		out = append(out, Resource{"server", s.str("id"), s.str("name"), d})
	}
	for _, p := range c.ports.all() {
		if p.str("project_id") == c.projectID {
			out = append(out, Resource{"port", p.str("id"), p.str("name"), fmt.Sprint(p["fixed_ips"])})
		}
	}
	for _, f := range c.floatingIPs.all() {
		out = append(out, Resource{"floatingip", f.str("id"), f.str("description"), f.str("floating_ip_address")})
	}
	for _, r := range c.routers.all() {
		out = append(out, Resource{"router", r.str("id"), r.str("name"), ""})
	}
	for _, n := range c.networks.all() {
		if n.str("id") != c.cfg.ExternalNetwork.ID {
			out = append(out, Resource{"network", n.str("id"), n.str("name"), ""})
		}
	}
	for _, s := range c.subnets.all() {
		if s.str("network_id") != c.cfg.ExternalNetwork.ID {
			out = append(out, Resource{"subnet", s.str("id"), s.str("name"), s.str("cidr")})
		}
	}
	for _, g := range c.secGroups.all() {
		if g.str("name") != "default" {
			out = append(out, Resource{"security_group", g.str("id"), g.str("name"), ""})
		}
	}
	for _, lb := range c.loadBalancers.all() {
		out = append(out, Resource{"loadbalancer", lb.str("id"), lb.str("name"),
			lb.str("provisioning_status") + "/" + lb.str("operating_status") + " " + lb.str("vip_address")})
	}
	for _, k := range []struct {
		kind string
		t    *table
	}{{"listener", c.listeners}, {"pool", c.pools}, {"healthmonitor", c.monitors}} {
		for _, o := range k.t.all() {
			out = append(out, Resource{k.kind, o.str("id"), o.str("name"), o.str("provisioning_status") + "/" + o.str("operating_status")})
		}
	}
	for _, m := range c.members.all() {
		out = append(out, Resource{"member", m.str("id"), m.str("name"),
			fmt.Sprintf("%s/%s %s:%v", m.str("provisioning_status"), m.str("operating_status"), m.str("address"), m["protocol_port"])})
	}
	return out
}

// AdminHandler serves the admin API, for the test bed's host only:
//
//	GET /calls      how many times each route was called
//	GET /resources  what the project holds
//	POST /faults    inject a Fault (JSON)
//	DELETE /faults  clear them
func (c *Cloud) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /calls", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, c.Calls()) })
	mux.HandleFunc("GET /resources", func(w http.ResponseWriter, _ *http.Request) {
		r := c.Resources()
		if r == nil {
			r = []Resource{}
		}
		writeJSON(w, http.StatusOK, r)
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var f Fault
		if !decode(w, r, &f, func(w http.ResponseWriter, s int, m string) { writeJSON(w, s, map[string]string{"error": m}) }) {
			return
		}
		if err := c.Inject(f); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, _ *http.Request) {
		c.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
