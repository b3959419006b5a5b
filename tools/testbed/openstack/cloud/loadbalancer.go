package cloud

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
)

// Octavia's API (load-balancer v2) as CAPO calls it for a cluster's API server: load balancers
// with their VIP port, listeners, pools, members and health monitors, each with Octavia's
// provisioning and operating states. A load balancer is immutable while a change of it or of one
// of its children is being applied (PENDING_*): a client waits for ACTIVE between calls, as CAPO
// does. What a load balancer is made of is handed to a Balancers implementation, which runs a
// real TCP load balancer at the VIP (package containers).

// Balancers makes load balancers real. Apply starts the load balancer of spec or brings a running
// one to spec; it returns once it serves as spec says.
type Balancers interface {
	Apply(ctx context.Context, spec BalancerSpec) error
	Delete(ctx context.Context, lbID string) error
	// AddAddress and RemoveAddress give a load balancer a floating IP, or take it away.
	AddAddress(ctx context.Context, lbID string, ip netip.Addr) error
	RemoveAddress(ctx context.Context, lbID string, ip netip.Addr) error
	// Health says, for each member of the load balancer by ID, whether its health monitor finds
	// it up ("UP", "DOWN"; "" while it has no monitor or is not checked yet).
	Health(ctx context.Context, lbID string) (map[string]string, error)
}

// BalancerSpec is a load balancer as its machine sees it.
type BalancerSpec struct {
	ID, Name string
	VIP      netip.Addr
	// Addresses are the floating IPs of its VIP port.
	Addresses []netip.Addr
	Listeners []BalancedListener
}

// BalancedListener is one listener with its pool.
type BalancedListener struct {
	ID   string
	Port int
	// AllowedCIDRs, when not empty, are the only sources it accepts connections from.
	AllowedCIDRs []string
	PoolID       string
	Members      []BalancedMember
	// Monitor checks the members; nil: every member takes connections.
	Monitor *BalancedMonitor
}

// BalancedMember is one member of a pool.
type BalancedMember struct {
	ID      string
	Address netip.Addr
	Port    int
}

// BalancedMonitor is a pool's TCP health monitor, in seconds and checks.
type BalancedMonitor struct {
	Delay, Timeout, MaxRetries, MaxRetriesDown int
}

// octaviaMaxVersion is the newest API version served: CAPO reads the last of the version list
// and sets allowed CIDRs on listeners from v2.12 on.
const octaviaMaxVersion = "v2.27"

// octaviaKind is one Octavia resource: URL segment, JSON keys, its table and what it may be
// updated in.
type octaviaKind struct {
	segment, singular, plural, what, quota string
	table                                  func(*Cloud) *table
	create                                 func(c *Cloud, in object) (object, *apiError)
	updatable                              []string
	// parentOf is the load balancer a resource belongs to ("" for a load balancer itself).
	parentOf func(c *Cloud, o object) string
}

func (c *Cloud) octaviaKinds() []octaviaKind {
	return []octaviaKind{
		{segment: "loadbalancers", singular: "loadbalancer", plural: "loadbalancers", what: "Load Balancer", quota: "loadbalancer",
			table: func(c *Cloud) *table { return c.loadBalancers }, create: (*Cloud).createLoadBalancer,
			updatable: []string{"name", "description", "admin_state_up", "tags"}, parentOf: func(*Cloud, object) string { return "" }},
		{segment: "listeners", singular: "listener", plural: "listeners", what: "Listener", quota: "listener",
			table: func(c *Cloud) *table { return c.listeners }, create: (*Cloud).createListener,
			updatable: []string{"name", "description", "admin_state_up", "tags", "allowed_cidrs", "connection_limit", "default_pool_id"},
			parentOf:  func(_ *Cloud, o object) string { return firstID(o, "loadbalancers") }},
		{segment: "pools", singular: "pool", plural: "pools", what: "Pool", quota: "pool",
			table: func(c *Cloud) *table { return c.pools }, create: (*Cloud).createPool,
			updatable: []string{"name", "description", "admin_state_up", "tags", "lb_algorithm"},
			parentOf:  func(_ *Cloud, o object) string { return firstID(o, "loadbalancers") }},
		{segment: "healthmonitors", singular: "healthmonitor", plural: "healthmonitors", what: "Health Monitor", quota: "health_monitor",
			table: func(c *Cloud) *table { return c.monitors }, create: (*Cloud).createMonitor,
			updatable: []string{"name", "admin_state_up", "tags", "delay", "timeout", "max_retries", "max_retries_down"},
			parentOf: func(c *Cloud, o object) string {
				if p, ok := c.pools.get(firstID(o, "pools")); ok {
					return firstID(p, "loadbalancers")
				}
				return ""
			}},
	}
}

// octaviaStamp is a time as Octavia writes it: without a zone (UTC), which some of gophercloud's
// Octavia results require.
func octaviaStamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05") }

func firstID(o object, key string) string {
	refs, _ := o[key].([]any)
	if len(refs) == 0 {
		return ""
	}
	m, _ := refs[0].(map[string]any)
	id, _ := m["id"].(string)
	return id
}

func ids(id string) []any { return []any{map[string]any{"id": id}} }

func octaviaError(w http.ResponseWriter, err *apiError) {
	writeJSON(w, err.status, map[string]any{"faultcode": "Client", "faultstring": err.msg, "debuginfo": nil})
}

//nolint:funlen // a table of Octavia's routes, one small handler each: a reader wants it whole
func (c *Cloud) loadBalancerRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /load-balancer/{$}", func(w http.ResponseWriter, _ *http.Request) {
		var versions []any
		for _, v := range []string{"v2.0", "v2.12", octaviaMaxVersion} {
			status := "SUPPORTED"
			if v == octaviaMaxVersion {
				status = "CURRENT"
			}
			versions = append(versions, map[string]any{"id": v, "status": status, "updated": "2023-01-01T00:00:00Z", "links": c.links("load-balancer/v2")})
		}
		writeJSON(w, http.StatusOK, map[string]any{"versions": versions})
	})
	const base = "/load-balancer/v2.0/lbaas/"
	mux.HandleFunc("GET "+base+"providers", c.guarded(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"providers": []any{
			map[string]any{"name": "amphora", "description": "The Octavia Amphora driver (here: haproxy in a container at the VIP)."},
			map[string]any{"name": "octavia", "description": "Deprecated alias of the Octavia Amphora driver."}}})
	}))
	mux.HandleFunc("GET "+base+"flavors", c.guarded(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"flavors": []any{}})
	}))
	for _, k := range c.octaviaKinds() {
		mux.HandleFunc("GET "+base+k.segment, c.guarded(func(w http.ResponseWriter, r *http.Request) {
			c.mu.Lock()
			out := c.listOctavia(k.table(c).all(), r)
			c.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{k.plural: out, k.plural + "_links": []any{}})
		}))
		mux.HandleFunc("GET "+base+k.segment+"/{id}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
			c.mu.Lock()
			o, ok := k.table(c).get(r.PathValue("id"))
			if ok {
				o = o.clone()
			}
			c.mu.Unlock()
			if !ok {
				octaviaError(w, notFound(k.what, r.PathValue("id")))
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{k.singular: o})
		}))
		mux.HandleFunc("POST "+base+k.segment, c.guarded(func(w http.ResponseWriter, r *http.Request) {
			var body map[string]object
			if !decode(w, r, &body, func(w http.ResponseWriter, s int, m string) { octaviaError(w, &apiError{status: s, msg: m}) }) {
				return
			}
			c.mu.Lock()
			var o object
			err := c.octaviaQuota(k)
			if err == nil {
				o, err = k.create(c, body[k.singular])
			}
			if err == nil {
				o = o.clone()
			}
			c.mu.Unlock()
			if err != nil {
				octaviaError(w, err)
				return
			}
			writeJSON(w, http.StatusCreated, map[string]any{k.singular: o})
		}))
		mux.HandleFunc("PUT "+base+k.segment+"/{id}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
			var body map[string]object
			if !decode(w, r, &body, func(w http.ResponseWriter, s int, m string) { octaviaError(w, &apiError{status: s, msg: m}) }) {
				return
			}
			c.mu.Lock()
			o, err := c.updateOctavia(k, r.PathValue("id"), body[k.singular])
			c.mu.Unlock()
			if err != nil {
				octaviaError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{k.singular: o})
		}))
		mux.HandleFunc("DELETE "+base+k.segment+"/{id}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
			c.mu.Lock()
			err := c.deleteOctavia(k, r.PathValue("id"), r.URL.Query().Get("cascade") == "true")
			c.mu.Unlock()
			if err != nil {
				octaviaError(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
	}
	mux.HandleFunc("GET "+base+"pools/{id}/members", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		_, ok := c.pools.get(r.PathValue("id"))
		var of []object
		for _, m := range c.members.all() {
			if m.str("pool_id") == r.PathValue("id") {
				of = append(of, m)
			}
		}
		out := c.listOctavia(of, r)
		c.mu.Unlock()
		if !ok {
			octaviaError(w, notFound("Pool", r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"members": out, "members_links": []any{}})
	}))
	mux.HandleFunc("GET "+base+"pools/{id}/members/{member}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		m, ok := c.members.get(r.PathValue("member"))
		ok = ok && m.str("pool_id") == r.PathValue("id")
		if ok {
			m = m.clone()
		}
		c.mu.Unlock()
		if !ok {
			octaviaError(w, notFound("Member", r.PathValue("member")))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"member": m})
	}))
	mux.HandleFunc("POST "+base+"pools/{id}/members", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]object
		if !decode(w, r, &body, func(w http.ResponseWriter, s int, m string) { octaviaError(w, &apiError{status: s, msg: m}) }) {
			return
		}
		c.mu.Lock()
		var m object
		err := c.faults.overQuota("member", c.members.len())
		if err != nil {
			err = &apiError{http.StatusForbidden, "", "Quota has been met for resources: Member"}
		} else {
			m, err = c.createMember(r.PathValue("id"), body["member"])
		}
		if err == nil {
			m = m.clone()
		}
		c.mu.Unlock()
		if err != nil {
			octaviaError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"member": m})
	}))
	mux.HandleFunc("DELETE "+base+"pools/{id}/members/{member}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		err := c.deleteMember(r.PathValue("id"), r.PathValue("member"))
		c.mu.Unlock()
		if err != nil {
			octaviaError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
}

// listOctavia filters a list as Octavia does (a field equals the value, tags) and shows the
// fields asked for.
func (c *Cloud) listOctavia(of []object, r *http.Request) []any {
	out := []any{}
	for _, o := range of {
		if matches(o, r.URL.Query()) {
			out = append(out, fieldsOf(o.clone(), r.URL.Query()["fields"]))
		}
	}
	return out
}

func (c *Cloud) octaviaQuota(k octaviaKind) *apiError {
	if err := c.faults.overQuota(k.quota, k.table(c).len()); err != nil {
		return &apiError{http.StatusForbidden, "", "Quota has been met for resources: " + k.what}
	}
	return nil
}

// octaviaObject are the attributes every Octavia resource carries, with those the request gave.
func (c *Cloud) octaviaObject(in object, allowed ...string) object {
	now := octaviaStamp()
	o := object{"id": newID(), "name": "", "description": "", "tags": []string{}, "project_id": c.projectID,
		"tenant_id": c.projectID, "created_at": now, "updated_at": now, "admin_state_up": true,
		"provisioning_status": "PENDING_CREATE", "operating_status": "OFFLINE"}
	for _, k := range append(allowed, "name", "description", "tags", "admin_state_up") {
		if v, ok := in[k]; ok && v != nil {
			o[k] = v
		}
	}
	o["tags"] = uniq(o.strings("tags"))
	return o
}

// mutable refuses a change of a load balancer, or of one of its children, while it is not
// ACTIVE: Octavia's ImmutableObject (409), which CAPO avoids by waiting between its calls.
func (c *Cloud) mutable(lbID string) *apiError {
	lb, ok := c.loadBalancers.get(lbID)
	if !ok {
		return notFound("Load Balancer", lbID)
	}
	if st := lb.str("provisioning_status"); st != "ACTIVE" {
		return &apiError{http.StatusConflict, "", fmt.Sprintf("Invalid state %s of loadbalancer resource %s", st, lbID)}
	}
	return nil
}

func (c *Cloud) createLoadBalancer(in object) (object, *apiError) {
	subnetID, _ := in["vip_subnet_id"].(string)
	networkID, _ := in["vip_network_id"].(string)
	if subnetID == "" && networkID == "" {
		return nil, badRequest("Validation failure: VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id.")
	}
	if subnetID != "" {
		s, ok := c.subnets.get(subnetID)
		if !ok {
			return nil, badRequest(fmt.Sprintf("Validation failure: Subnet %s not found.", subnetID))
		}
		networkID = s.str("network_id")
	} else if n, ok := c.networks.get(networkID); !ok || len(n.strings("subnets")) == 0 {
		return nil, badRequest(fmt.Sprintf("Validation failure: Network %s not found or has no subnet.", networkID))
	} else {
		subnetID = n.strings("subnets")[0]
	}
	if p, _ := in["provider"].(string); p != "" && p != "amphora" && p != "octavia" {
		return nil, badRequest(fmt.Sprintf("Provider '%s' is not enabled.", p))
	}
	o := c.octaviaObject(in, "flavor_id", "availability_zone", "vip_qos_policy_id")
	id := o.str("id")
	fixed := map[string]any{"subnet_id": subnetID}
	if want, _ := in["vip_address"].(string); want != "" {
		fixed["ip_address"] = want
	}
	port, _, err := c.createPort(object{"network_id": networkID, "fixed_ips": []any{fixed}, "name": "octavia-lb-" + id,
		"device_owner": "Octavia", "device_id": "lb-" + id})
	if err != nil {
		return nil, err
	}
	port["status"] = "ACTIVE"
	vip, _ := port["fixed_ips"].([]any)[0].(map[string]any)["ip_address"].(string)
	for k, v := range map[string]any{"vip_address": vip, "vip_port_id": port.str("id"), "vip_subnet_id": subnetID,
		"vip_network_id": networkID, "provider": "amphora", "listeners": []any{}, "pools": []any{}, "additional_vips": []any{}} {
		o[k] = v
	}
	for _, k := range []string{"flavor_id", "availability_zone", "vip_qos_policy_id"} {
		if _, ok := o[k]; !ok {
			o[k] = nil
		}
	}
	c.loadBalancers.put(o)
	c.provision(id, c.faults.loadBalancerFault(o.str("name")))
	return o, nil
}

func (c *Cloud) createListener(in object) (object, *apiError) {
	lbID, _ := in["loadbalancer_id"].(string)
	if err := c.mutable(lbID); err != nil {
		return nil, err
	}
	if p, _ := in["protocol"].(string); p != "TCP" {
		return nil, badRequest(fmt.Sprintf("Invalid input for field/attribute protocol. Value: '%s'. This simulated provider serves TCP only", p))
	}
	port, ok := in["protocol_port"].(float64)
	if !ok || port < 1 || port > 65535 || port == haproxyStatsPort {
		return nil, badRequest(fmt.Sprintf("Invalid input for field/attribute protocol_port. Value: '%v'. (%d is the simulated amphora's own)", in["protocol_port"], haproxyStatsPort))
	}
	for _, l := range c.listeners.all() {
		if firstID(l, "loadbalancers") == lbID && l["protocol_port"] == port {
			return nil, conflict("", fmt.Sprintf("Another Listener on this Load Balancer is already using protocol_port %v", port))
		}
	}
	o := c.octaviaObject(in, "protocol", "protocol_port", "connection_limit", "allowed_cidrs", "default_pool_id")
	o["loadbalancers"] = ids(lbID)
	for k, v := range map[string]any{"connection_limit": float64(-1), "allowed_cidrs": []any{}, "default_pool_id": nil, "l7policies": []any{},
		"timeout_client_data": float64(50000), "timeout_member_data": float64(50000), "timeout_member_connect": float64(5000), "insert_headers": map[string]any{}} {
		if _, ok := o[k]; !ok {
			o[k] = v
		}
	}
	c.listeners.put(o)
	c.addChild(lbID, "listeners", o.str("id"))
	return o, nil
}

func (c *Cloud) createPool(in object) (object, *apiError) {
	listenerID, _ := in["listener_id"].(string)
	lbID, _ := in["loadbalancer_id"].(string)
	var listener object
	if listenerID != "" {
		l, ok := c.listeners.get(listenerID)
		if !ok {
			return nil, notFound("Listener", listenerID)
		}
		if l["default_pool_id"] != nil {
			return nil, conflict("", fmt.Sprintf("Listener %s already has a default pool", listenerID))
		}
		listener, lbID = l, firstID(l, "loadbalancers")
	}
	if err := c.mutable(lbID); err != nil {
		return nil, err
	}
	if p, _ := in["protocol"].(string); p != "TCP" {
		return nil, badRequest(fmt.Sprintf("Invalid input for field/attribute protocol. Value: '%s'. This simulated provider serves TCP only", p))
	}
	if a, _ := in["lb_algorithm"].(string); !slices.Contains([]string{"ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT"}, a) {
		return nil, badRequest(fmt.Sprintf("Invalid input for field/attribute lb_algorithm. Value: '%v'. Value should be one of: ROUND_ROBIN, LEAST_CONNECTIONS, SOURCE_IP, SOURCE_IP_PORT", in["lb_algorithm"]))
	}
	o := c.octaviaObject(in, "protocol", "lb_algorithm", "session_persistence")
	o["loadbalancers"], o["listeners"], o["members"], o["healthmonitor_id"] = ids(lbID), []any{}, []any{}, nil
	if _, ok := o["session_persistence"]; !ok {
		o["session_persistence"] = nil
	}
	if listener != nil {
		o["listeners"] = ids(listenerID)
		listener["default_pool_id"] = o.str("id")
		listener["provisioning_status"] = "PENDING_UPDATE"
	}
	c.pools.put(o)
	c.addChild(lbID, "pools", o.str("id"))
	return o, nil
}

func (c *Cloud) createMonitor(in object) (object, *apiError) {
	poolID, _ := in["pool_id"].(string)
	pool, ok := c.pools.get(poolID)
	if !ok {
		return nil, notFound("Pool", poolID)
	}
	lbID := firstID(pool, "loadbalancers")
	if err := c.mutable(lbID); err != nil {
		return nil, err
	}
	if pool["healthmonitor_id"] != nil {
		return nil, conflict("", fmt.Sprintf("Pool %s already has a health monitor", poolID))
	}
	if t, _ := in["type"].(string); t != "TCP" {
		return nil, badRequest(fmt.Sprintf("Invalid input for field/attribute type. Value: '%s'. This simulated provider checks TCP only", t))
	}
	for _, k := range []string{"delay", "timeout", "max_retries"} {
		if v, ok := in[k].(float64); !ok || v < 1 {
			return nil, badRequest(fmt.Sprintf("Invalid input for field/attribute %s. Value: '%v'.", k, in[k]))
		}
	}
	o := c.octaviaObject(in, "type", "delay", "timeout", "max_retries", "max_retries_down")
	if _, ok := o["max_retries_down"]; !ok {
		o["max_retries_down"] = float64(3) // Octavia's default; a number as JSON decodes one
	}
	o["pools"] = ids(poolID)
	c.monitors.put(o)
	pool["healthmonitor_id"] = o.str("id")
	pool["provisioning_status"] = "PENDING_UPDATE"
	c.provision(lbID, loadBalancerFault{})
	return o, nil
}

func (c *Cloud) createMember(poolID string, in object) (object, *apiError) {
	pool, ok := c.pools.get(poolID)
	if !ok {
		return nil, notFound("Pool", poolID)
	}
	lbID := firstID(pool, "loadbalancers")
	if err := c.mutable(lbID); err != nil {
		return nil, err
	}
	addr, err := netip.ParseAddr(fmt.Sprint(in["address"]))
	if err != nil {
		return nil, badRequest(fmt.Sprintf("Invalid input for field/attribute address. Value: '%v'.", in["address"]))
	}
	port, ok := in["protocol_port"].(float64)
	if !ok || port < 1 || port > 65535 {
		return nil, badRequest(fmt.Sprintf("Invalid input for field/attribute protocol_port. Value: '%v'.", in["protocol_port"]))
	}
	for _, m := range c.members.all() {
		if m.str("pool_id") == poolID && m.str("address") == addr.String() && m["protocol_port"] == port {
			return nil, conflict("", fmt.Sprintf("Duplicate member with address %s and port %v for pool %s", addr, port, poolID))
		}
	}
	o := c.octaviaObject(in, "address", "protocol_port", "subnet_id", "weight", "backup", "monitor_address", "monitor_port")
	o["address"], o["pool_id"] = addr.String(), poolID
	for k, v := range map[string]any{"weight": float64(1), "backup": false, "monitor_address": nil, "monitor_port": nil, "subnet_id": nil} {
		if _, ok := o[k]; !ok {
			o[k] = v
		}
	}
	c.members.put(o)
	pool["members"] = append(pool["members"].([]any), map[string]any{"id": o.str("id")})
	pool["provisioning_status"] = "PENDING_UPDATE"
	c.provision(lbID, loadBalancerFault{})
	return o, nil
}

// addChild records a listener or pool on its load balancer and applies the change.
func (c *Cloud) addChild(lbID, key, id string) {
	lb, _ := c.loadBalancers.get(lbID)
	lb[key] = append(lb[key].([]any), map[string]any{"id": id})
	c.provision(lbID, loadBalancerFault{})
}

func (c *Cloud) updateOctavia(k octaviaKind, id string, in object) (object, *apiError) {
	o, ok := k.table(c).get(id)
	if !ok {
		return nil, notFound(k.what, id)
	}
	lbID := k.parentOf(c, o)
	if lbID == "" {
		lbID = id
	}
	if err := c.mutable(lbID); err != nil {
		return nil, err
	}
	for key := range in {
		if !slices.Contains(k.updatable, key) {
			return nil, badRequest(fmt.Sprintf("Invalid input for field/attribute %s: it cannot be updated.", key))
		}
	}
	for key, v := range in {
		o[key] = v
	}
	o["updated_at"] = octaviaStamp()
	if lbID != id {
		o["provisioning_status"] = "PENDING_UPDATE"
	}
	c.provision(lbID, loadBalancerFault{})
	return o.clone(), nil
}

// deleteOctavia removes a resource: a load balancer with its children only when cascade is asked
// (else 409 while it has any), a child once its load balancer is ACTIVE.
func (c *Cloud) deleteOctavia(k octaviaKind, id string, cascade bool) *apiError {
	o, ok := k.table(c).get(id)
	if !ok {
		return notFound(k.what, id)
	}
	if lbID := k.parentOf(c, o); lbID != "" {
		if err := c.mutable(lbID); err != nil {
			return err
		}
		o["provisioning_status"] = "PENDING_DELETE"
		c.provision(lbID, loadBalancerFault{})
		return nil
	}
	// A load balancer being changed cannot be deleted either, a stuck one included; one in ERROR can.
	if st := o.str("provisioning_status"); strings.HasPrefix(st, "PENDING_") {
		return &apiError{http.StatusConflict, "", fmt.Sprintf("Invalid state %s of loadbalancer resource %s", st, id)}
	}
	if children := len(o["listeners"].([]any)) + len(o["pools"].([]any)); children > 0 && !cascade {
		return &apiError{http.StatusBadRequest, "", fmt.Sprintf("Cannot delete Load Balancer %s - it has children", id)}
	}
	if c.closed {
		return &apiError{http.StatusServiceUnavailable, "", "The cloud is shutting down."}
	}
	o["provisioning_status"] = "PENDING_DELETE"
	c.booted.Add(1)
	go c.removeLoadBalancer(id)
	return nil
}

func (c *Cloud) deleteMember(poolID, memberID string) *apiError {
	m, ok := c.members.get(memberID)
	if !ok || m.str("pool_id") != poolID {
		return notFound("Member", memberID)
	}
	pool, _ := c.pools.get(poolID)
	lbID := firstID(pool, "loadbalancers")
	if err := c.mutable(lbID); err != nil {
		return err
	}
	m["provisioning_status"] = "PENDING_DELETE"
	pool["provisioning_status"] = "PENDING_UPDATE"
	c.provision(lbID, loadBalancerFault{})
	return nil
}

// provision applies the load balancer's records to its machine in the background: the load
// balancer is PENDING_UPDATE (or PENDING_CREATE) until it serves as they say, then ACTIVE, and
// its children that waited are ACTIVE or gone. fault, for a new load balancer, is what the
// admin API injected: it stays in PENDING_CREATE (for a while, or until the faults are cleared)
// or goes to ERROR.
func (c *Cloud) provision(lbID string, fault loadBalancerFault) {
	lb, _ := c.loadBalancers.get(lbID)
	if lb.str("provisioning_status") == "ACTIVE" {
		lb["provisioning_status"] = "PENDING_UPDATE"
	}
	lb["updated_at"] = octaviaStamp()
	if c.closed {
		return
	}
	cleared := c.faultsCleared
	c.booted.Add(1)
	go func() {
		defer c.booted.Done()
		switch fault.kind {
		case "stuck":
			c.log.Info("load balancer stuck in PENDING_CREATE (fault)", "id", lbID, "for", fault.stuckFor)
			var until <-chan time.Time // for ever: until the faults are cleared
			if fault.stuckFor > 0 {
				until = time.After(fault.stuckFor)
			}
			select {
			case <-c.ctx.Done():
				return
			case <-until:
			case <-cleared:
			}
		case "error":
			c.settle(lbID, fmt.Errorf("fault injected"))
			return
		}
		c.mu.Lock()
		spec, ok := c.balancerSpec(lbID)
		c.mu.Unlock()
		var err error
		if ok && c.cfg.Balancers != nil {
			err = c.cfg.Balancers.Apply(c.ctx, spec)
		}
		if c.ctx.Err() != nil {
			return
		}
		c.settle(lbID, err)
	}()
}

// settle ends a change: the load balancer and what was pending in it are ACTIVE, or the load
// balancer is in ERROR.
func (c *Cloud) settle(lbID string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, ok := c.loadBalancers.get(lbID)
	if !ok || lb.str("provisioning_status") == "PENDING_DELETE" {
		return
	}
	if err != nil {
		c.log.Error("provision a load balancer", "id", lbID, "err", err)
		lb["provisioning_status"], lb["operating_status"] = "ERROR", "ERROR"
		return
	}
	for _, t := range []*table{c.listeners, c.pools, c.monitors, c.members} {
		for _, o := range t.all() {
			if c.lbOf(o) != lbID {
				continue
			}
			switch o.str("provisioning_status") {
			case "PENDING_DELETE":
				c.forget(t, o)
			case "PENDING_CREATE", "PENDING_UPDATE":
				o["provisioning_status"] = "ACTIVE"
			}
		}
	}
	lb["provisioning_status"] = "ACTIVE"
	c.refreshOperating(lbID, nil)
}

// lbOf is the load balancer of any Octavia resource.
func (c *Cloud) lbOf(o object) string {
	if pid := o.str("pool_id"); pid != "" {
		p, _ := c.pools.get(pid)
		return firstID(p, "loadbalancers")
	}
	if firstID(o, "loadbalancers") != "" {
		return firstID(o, "loadbalancers")
	}
	if p, ok := c.pools.get(firstID(o, "pools")); ok {
		return firstID(p, "loadbalancers")
	}
	return ""
}

// forget removes a child of table t whose deletion was applied, and its references.
func (c *Cloud) forget(t *table, o object) {
	id := o.str("id")
	drop := func(owner object, key string) {
		if refs, ok := owner[key].([]any); ok {
			owner[key] = slices.DeleteFunc(refs, func(r any) bool { m, _ := r.(map[string]any); return m["id"] == id })
		}
	}
	switch t {
	case c.members:
		if p, ok := c.pools.get(o.str("pool_id")); ok {
			drop(p, "members")
		}
	case c.monitors:
		if p, ok := c.pools.get(firstID(o, "pools")); ok {
			p["healthmonitor_id"] = nil
		}
	case c.pools:
		lb, _ := c.loadBalancers.get(firstID(o, "loadbalancers"))
		drop(lb, "pools")
		for _, l := range c.listeners.all() {
			if l["default_pool_id"] == id {
				l["default_pool_id"] = nil
			}
		}
		for _, m := range c.members.all() {
			if m.str("pool_id") == id {
				c.members.remove(m.str("id"))
			}
		}
		if mid, _ := o["healthmonitor_id"].(string); mid != "" {
			c.monitors.remove(mid)
		}
	case c.listeners:
		lb, _ := c.loadBalancers.get(firstID(o, "loadbalancers"))
		drop(lb, "listeners")
	}
	t.remove(id)
}

// removeLoadBalancer deletes the load balancer's machine, then its records, its children's and
// its VIP port (with the floating IP's association): what a cascade delete leaves is nothing.
func (c *Cloud) removeLoadBalancer(id string) {
	defer c.booted.Done()
	if c.cfg.Balancers != nil {
		if err := c.cfg.Balancers.Delete(c.ctx, id); err != nil {
			c.log.Error("delete a load balancer's machine", "id", id, "err", err)
			c.mu.Lock()
			if lb, ok := c.loadBalancers.get(id); ok {
				lb["provisioning_status"], lb["operating_status"] = "ERROR", "ERROR"
			}
			c.mu.Unlock()
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, ok := c.loadBalancers.get(id)
	if !ok {
		return
	}
	for _, t := range []*table{c.members, c.monitors, c.pools, c.listeners} {
		for _, o := range t.all() {
			if c.lbOf(o) == id {
				t.remove(o.str("id"))
			}
		}
	}
	if p, ok := c.ports.get(lb.str("vip_port_id")); ok {
		for _, f := range c.floatingIPs.all() {
			if f.str("port_id") == p.str("id") {
				f["port_id"], f["fixed_ip_address"], f["router_id"], f["status"] = nil, nil, nil, "DOWN"
			}
		}
		c.ports.remove(p.str("id"))
	}
	c.loadBalancers.remove(id)
}

// balancerSpec is what the load balancer's records say its machine serves (what is pending
// deletion left out).
func (c *Cloud) balancerSpec(lbID string) (BalancerSpec, bool) {
	lb, ok := c.loadBalancers.get(lbID)
	if !ok {
		return BalancerSpec{}, false
	}
	spec := BalancerSpec{ID: lbID, Name: lb.str("name")}
	spec.VIP, _ = netip.ParseAddr(lb.str("vip_address"))
	for _, f := range c.floatingIPs.all() {
		if f.str("port_id") == lb.str("vip_port_id") {
			spec.Addresses = append(spec.Addresses, netip.MustParseAddr(f.str("floating_ip_address")))
		}
	}
	for _, l := range c.listeners.all() {
		if firstID(l, "loadbalancers") != lbID || l.str("provisioning_status") == "PENDING_DELETE" {
			continue
		}
		bl := BalancedListener{ID: l.str("id"), Port: int(l["protocol_port"].(float64)), AllowedCIDRs: object{"c": l["allowed_cidrs"]}.strings("c")}
		if pid, _ := l["default_pool_id"].(string); pid != "" {
			pool, _ := c.pools.get(pid)
			if pool.str("provisioning_status") != "PENDING_DELETE" {
				bl.PoolID = pid
				bl.Members = c.balancedMembers(pid)
				bl.Monitor = c.balancedMonitor(pool)
			}
		}
		spec.Listeners = append(spec.Listeners, bl)
	}
	sort.Slice(spec.Listeners, func(i, j int) bool { return spec.Listeners[i].Port < spec.Listeners[j].Port })
	return spec, true
}

func (c *Cloud) balancedMembers(poolID string) []BalancedMember {
	var out []BalancedMember
	for _, m := range c.members.all() {
		if m.str("pool_id") == poolID && m.str("provisioning_status") != "PENDING_DELETE" {
			out = append(out, BalancedMember{ID: m.str("id"), Address: netip.MustParseAddr(m.str("address")), Port: int(m["protocol_port"].(float64))})
		}
	}
	return out
}

func (c *Cloud) balancedMonitor(pool object) *BalancedMonitor {
	mid, _ := pool["healthmonitor_id"].(string)
	mon, ok := c.monitors.get(mid)
	if !ok || mon.str("provisioning_status") == "PENDING_DELETE" {
		return nil
	}
	n := func(k string) int { f, _ := mon[k].(float64); return int(f) }
	return &BalancedMonitor{Delay: n("delay"), Timeout: n("timeout"), MaxRetries: n("max_retries"), MaxRetriesDown: n("max_retries_down")}
}

// refreshOperating sets the operating status of the load balancer's members from their health
// (nil: not known yet), and of its pools, listeners and itself from theirs, as Octavia does:
// ONLINE, DEGRADED when some member is down, ERROR when every one is; NO_MONITOR without a
// health monitor.
func (c *Cloud) refreshOperating(lbID string, health map[string]string) {
	lb, ok := c.loadBalancers.get(lbID)
	if !ok || lb.str("provisioning_status") != "ACTIVE" {
		return
	}
	pools, failing, failed := 0, 0, 0
	for _, p := range c.pools.all() {
		if firstID(p, "loadbalancers") != lbID {
			continue
		}
		up, down := 0, 0
		for _, m := range c.members.all() {
			if m.str("pool_id") != p.str("id") {
				continue
			}
			switch {
			case p["healthmonitor_id"] == nil:
				m["operating_status"] = "NO_MONITOR"
				up++
			case health[m.str("id")] == "DOWN":
				m["operating_status"] = "ERROR"
				down++
			case health[m.str("id")] == "UP":
				m["operating_status"] = "ONLINE"
				up++
			}
		}
		pools++
		switch {
		case down > 0 && up == 0:
			p["operating_status"] = "ERROR"
			failing, failed = failing+1, failed+1
		case down > 0:
			p["operating_status"] = "DEGRADED"
			failing++
		default:
			p["operating_status"] = "ONLINE"
		}
	}
	for _, l := range c.listeners.all() {
		if firstID(l, "loadbalancers") == lbID {
			l["operating_status"] = "ONLINE"
			if pid, _ := l["default_pool_id"].(string); pid != "" {
				if p, ok := c.pools.get(pid); ok {
					l["operating_status"] = p["operating_status"]
				}
			}
		}
	}
	switch {
	case pools > 0 && failed == pools:
		lb["operating_status"] = "ERROR"
	case failing > 0:
		lb["operating_status"] = "DEGRADED"
	default:
		lb["operating_status"] = "ONLINE"
	}
}

// watchHealth asks the load balancers' machines for their members' health every few seconds, as
// the amphorae report it to Octavia, until the cloud closes.
func (c *Cloud) watchHealth(every time.Duration) {
	defer c.booted.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}
		c.mu.Lock()
		var active []string
		for _, lb := range c.loadBalancers.all() {
			if lb.str("provisioning_status") == "ACTIVE" {
				active = append(active, lb.str("id"))
			}
		}
		c.mu.Unlock()
		for _, id := range active {
			ctx, cancel := context.WithTimeout(c.ctx, every)
			health, err := c.cfg.Balancers.Health(ctx, id)
			cancel()
			if err != nil {
				// Its amphora does not answer: Octavia shows the load balancer in ERROR.
				c.log.Warn("health of a load balancer", "id", id, "err", err)
				c.mu.Lock()
				if lb, ok := c.loadBalancers.get(id); ok && lb.str("provisioning_status") == "ACTIVE" {
					lb["operating_status"] = "ERROR"
				}
				c.mu.Unlock()
				continue
			}
			c.mu.Lock()
			c.refreshOperating(id, health)
			c.mu.Unlock()
		}
	}
}

// haproxyStatsPort is where the simulated amphora reports its members' health; no listener may
// take it.
const haproxyStatsPort = 1936

// HaproxyStatsPort is that port, for the machines that serve it.
const HaproxyStatsPort = haproxyStatsPort
