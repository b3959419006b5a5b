package cloud

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// apiError is a refusal in a service's own shape: Neutron's type, Nova's and Keystone's codes.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.typ, e.msg) }

func neutronError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"NeutronError": map[string]any{"type": typ, "message": msg, "detail": ""}})
}

func notFound(what, id string) *apiError {
	return &apiError{http.StatusNotFound, strings.ReplaceAll(what, " ", "") + "NotFound", fmt.Sprintf("%s %s could not be found.", what, id)}
}

func badRequest(msg string) *apiError { return &apiError{http.StatusBadRequest, "BadRequest", msg} }

func conflict(typ, msg string) *apiError { return &apiError{http.StatusConflict, typ, msg} }

// neutronKind is one Neutron resource: its URL segment, JSON keys and rules. The hooks run with
// the cloud's lock held; what they must do outside it (a floating IP put on a machine) they
// return as an effect.
type neutronKind struct {
	segment, singular, plural, what string
	quota                           string
	table                           func(*Cloud) *table
	create                          func(c *Cloud, in object) (object, effect, *apiError)
	update                          func(c *Cloud, o, in object) (effect, *apiError)
	// remove checks that the resource may go and removes it with what goes with it.
	remove func(c *Cloud, o object) (effect, *apiError)
}

// effect is work on the machines that follows a change of the records, done without the lock.
type effect func(ctx context.Context)

func (c *Cloud) neutronKinds() []neutronKind {
	return []neutronKind{
		{segment: "networks", singular: "network", plural: "networks", what: "Network", quota: "network",
			table: func(c *Cloud) *table { return c.networks }, create: (*Cloud).createNetwork,
			update: updateFields("name", "description", "admin_state_up", "mtu", "port_security_enabled"),
			remove: (*Cloud).removeNetwork},
		{segment: "subnets", singular: "subnet", plural: "subnets", what: "Subnet", quota: "subnet",
			table: func(c *Cloud) *table { return c.subnets }, create: (*Cloud).createSubnet,
			update: updateFields("name", "description", "dns_nameservers", "host_routes", "enable_dhcp", "gateway_ip"),
			remove: (*Cloud).removeSubnet},
		{segment: "ports", singular: "port", plural: "ports", what: "Port", quota: "port",
			table: func(c *Cloud) *table { return c.ports }, create: (*Cloud).createPort, update: (*Cloud).updatePort,
			remove: (*Cloud).removePort},
		{segment: "security-groups", singular: "security_group", plural: "security_groups", what: "Security group", quota: "security_group",
			table: func(c *Cloud) *table { return c.secGroups }, create: (*Cloud).createSecurityGroupFrom,
			update: updateFields("name", "description", "stateful"), remove: (*Cloud).removeSecurityGroup},
		{segment: "security-group-rules", singular: "security_group_rule", plural: "security_group_rules", what: "Security group rule", quota: "security_group_rule",
			table: func(c *Cloud) *table { return c.secRules }, create: (*Cloud).createRule, remove: (*Cloud).removeRule},
		{segment: "routers", singular: "router", plural: "routers", what: "Router", quota: "router",
			table: func(c *Cloud) *table { return c.routers }, create: (*Cloud).createRouter, update: (*Cloud).updateRouter,
			remove: (*Cloud).removeRouter},
		{segment: "floatingips", singular: "floatingip", plural: "floatingips", what: "Floating IP", quota: "floatingip",
			table: func(c *Cloud) *table { return c.floatingIPs }, create: (*Cloud).createFloatingIP, update: (*Cloud).updateFloatingIP,
			remove: (*Cloud).removeFloatingIP},
	}
}

// neutronExtensions are the extensions a client may look for before it uses a feature.
var neutronExtensions = []string{
	"agent", "allowed-address-pairs", "binding", "external-net", "ext-gw-mode", "extra_dhcp_opt", "extraroute",
	"network-ip-availability", "port-security", "project-id", "quotas", "router", "security-group",
	"standard-attr-description", "standard-attr-revisions", "standard-attr-tag", "standard-attr-timestamp",
	"subnet_allocation", "availability_zone", "dns-integration", "net-mtu",
}

//nolint:funlen // a table of Neutron's routes, one line or small handler each: a reader wants it whole
func (c *Cloud) networkRoutes(mux *http.ServeMux) {
	versions := func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"versions": []any{map[string]any{
			"id": "v2.0", "status": "CURRENT", "links": c.links("network/v2.0/")}}})
	}
	mux.HandleFunc("GET /network/{$}", versions)
	mux.HandleFunc("GET /network/v2.0/extensions", c.guarded(func(w http.ResponseWriter, _ *http.Request) {
		var exts []any
		for _, a := range neutronExtensions {
			exts = append(exts, map[string]any{"alias": a, "name": a, "description": a, "updated": "2013-01-01T00:00:00-00:00", "links": []any{}})
		}
		writeJSON(w, http.StatusOK, map[string]any{"extensions": exts})
	}))
	for _, k := range c.neutronKinds() {
		base := "/network/v2.0/" + k.segment
		mux.HandleFunc("GET "+base, c.guarded(func(w http.ResponseWriter, r *http.Request) {
			c.mu.Lock()
			var out []any
			for _, o := range k.table(c).all() {
				if matches(o, r.URL.Query()) {
					out = append(out, fieldsOf(o.clone(), r.URL.Query()["fields"]))
				}
			}
			c.mu.Unlock()
			if out == nil {
				out = []any{}
			}
			writeJSON(w, http.StatusOK, map[string]any{k.plural: out})
		}))
		mux.HandleFunc("GET "+base+"/{id}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
			c.mu.Lock()
			o, ok := k.table(c).get(r.PathValue("id"))
			if ok {
				o = o.clone()
			}
			c.mu.Unlock()
			if !ok {
				c.neutronFail(w, notFound(k.what, r.PathValue("id")))
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{k.singular: o})
		}))
		mux.HandleFunc("POST "+base, c.guarded(func(w http.ResponseWriter, r *http.Request) {
			var body map[string]object
			if !decode(w, r, &body, func(w http.ResponseWriter, s int, m string) { neutronError(w, s, "BadRequest", m) }) {
				return
			}
			in, ok := body[k.singular]
			if !ok {
				neutronError(w, http.StatusBadRequest, "BadRequest", "Resource body required: "+k.singular)
				return
			}
			c.mu.Lock()
			var o object
			var fx effect
			err := c.faults.overQuota(k.quota, k.table(c).len())
			if err == nil {
				o, fx, err = k.create(c, in)
			}
			if err == nil {
				o = o.clone()
			}
			c.mu.Unlock()
			if err != nil {
				c.neutronFail(w, err)
				return
			}
			c.run(fx)
			writeJSON(w, http.StatusCreated, map[string]any{k.singular: o})
		}))
		mux.HandleFunc("PUT "+base+"/{id}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
			var body map[string]object
			if !decode(w, r, &body, func(w http.ResponseWriter, s int, m string) { neutronError(w, s, "BadRequest", m) }) {
				return
			}
			c.mu.Lock()
			o, ok := k.table(c).get(r.PathValue("id"))
			var err *apiError
			var fx effect
			switch {
			case !ok:
				err = notFound(k.what, r.PathValue("id"))
			case k.update == nil:
				err = badRequest(k.what + " cannot be updated.")
			default:
				// On a copy, kept only when the whole update is valid: a refused update changes
				// nothing, as in Neutron.
				o = o.clone()
				if fx, err = k.update(c, o, body[k.singular]); err == nil {
					touch(o)
					k.table(c).put(o)
					o = o.clone()
				}
			}
			c.mu.Unlock()
			if err != nil {
				c.neutronFail(w, err)
				return
			}
			c.run(fx)
			writeJSON(w, http.StatusOK, map[string]any{k.singular: o})
		}))
		mux.HandleFunc("DELETE "+base+"/{id}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
			c.mu.Lock()
			o, ok := k.table(c).get(r.PathValue("id"))
			var err *apiError
			var fx effect
			if !ok {
				err = notFound(k.what, r.PathValue("id"))
			} else {
				fx, err = k.remove(c, o)
			}
			c.mu.Unlock()
			if err != nil {
				c.neutronFail(w, err)
				return
			}
			c.run(fx)
			w.WriteHeader(http.StatusNoContent)
		}))
		c.tagRoutes(mux, base, k)
	}
	mux.HandleFunc("PUT /network/v2.0/routers/{id}/add_router_interface", c.guarded(c.routerInterface(true)))
	mux.HandleFunc("PUT /network/v2.0/routers/{id}/remove_router_interface", c.guarded(c.routerInterface(false)))
}

func (c *Cloud) neutronFail(w http.ResponseWriter, err *apiError) {
	neutronError(w, err.status, err.typ, err.msg)
}

// run does an effect after the records changed, with the lock released, bound to the cloud's life.
func (c *Cloud) run(fx effect) {
	if fx == nil {
		return
	}
	fx(c.ctx)
}

func fieldsOf(o object, fields []string) object {
	if len(fields) == 0 {
		return o
	}
	out := object{}
	for _, f := range fields {
		if v, ok := o[f]; ok {
			out[f] = v
		}
	}
	return out
}

func touch(o object) {
	o["updated_at"] = stamp()
	if n, ok := o["revision_number"].(int); ok {
		o["revision_number"] = n + 1
	} else if f, ok := o["revision_number"].(float64); ok {
		o["revision_number"] = int(f) + 1
	}
}

// tagRoutes are Neutron's tag API on one resource: replace all, add, check, remove one, remove all.
func (c *Cloud) tagRoutes(mux *http.ServeMux, base string, k neutronKind) {
	withObject := func(w http.ResponseWriter, r *http.Request, f func(o object) int) {
		c.mu.Lock()
		o, ok := k.table(c).get(r.PathValue("id"))
		status := http.StatusNotFound
		var tags []string
		if ok {
			status = f(o)
			tags = slices.Clone(o.strings("tags"))
		}
		c.mu.Unlock()
		switch {
		case !ok:
			c.neutronFail(w, notFound(k.what, r.PathValue("id")))
		case status == http.StatusOK:
			writeJSON(w, status, map[string]any{"tags": tags})
		case status == http.StatusNotFound:
			neutronError(w, status, "TagNotFound", fmt.Sprintf("Tag %s could not be found.", r.PathValue("tag")))
		default:
			w.WriteHeader(status)
		}
	}
	mux.HandleFunc("GET "+base+"/{id}/tags", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		withObject(w, r, func(object) int { return http.StatusOK })
	}))
	mux.HandleFunc("PUT "+base+"/{id}/tags", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Tags []string `json:"tags"`
		}
		if !decode(w, r, &body, func(w http.ResponseWriter, s int, m string) { neutronError(w, s, "BadRequest", m) }) {
			return
		}
		withObject(w, r, func(o object) int {
			o["tags"] = uniq(body.Tags)
			touch(o)
			return http.StatusOK
		})
	}))
	mux.HandleFunc("DELETE "+base+"/{id}/tags", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		withObject(w, r, func(o object) int { o["tags"] = []string{}; return http.StatusNoContent })
	}))
	mux.HandleFunc("PUT "+base+"/{id}/tags/{tag}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		withObject(w, r, func(o object) int {
			o["tags"] = uniq(append(o.strings("tags"), r.PathValue("tag")))
			return http.StatusCreated
		})
	}))
	mux.HandleFunc("GET "+base+"/{id}/tags/{tag}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		withObject(w, r, func(o object) int {
			if slices.Contains(o.strings("tags"), r.PathValue("tag")) {
				return http.StatusNoContent
			}
			return http.StatusNotFound
		})
	}))
	mux.HandleFunc("DELETE "+base+"/{id}/tags/{tag}", c.guarded(func(w http.ResponseWriter, r *http.Request) {
		withObject(w, r, func(o object) int {
			tags := o.strings("tags")
			if !slices.Contains(tags, r.PathValue("tag")) {
				return http.StatusNotFound
			}
			o["tags"] = slices.DeleteFunc(tags, func(t string) bool { return t == r.PathValue("tag") })
			return http.StatusNoContent
		})
	}))
}

func uniq(tags []string) []string {
	out := []string{}
	for _, t := range tags {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// updateFields is an update that may change the given fields only.
func updateFields(fields ...string) func(c *Cloud, o, in object) (effect, *apiError) {
	return func(_ *Cloud, o, in object) (effect, *apiError) {
		for k, v := range in {
			if !slices.Contains(fields, k) {
				return nil, badRequest(fmt.Sprintf("Cannot update read-only attribute %s", k))
			}
			o[k] = v
		}
		return nil, nil
	}
}

// standard are the attributes every Neutron resource carries, with those the request gave.
func (c *Cloud) standard(in object, allowed ...string) object {
	now := stamp()
	o := object{
		"id": newID(), "name": "", "description": "", "tags": []string{}, "project_id": c.projectID,
		"tenant_id": c.projectID, "created_at": now, "updated_at": now, "revision_number": 0,
	}
	for _, k := range append(allowed, "name", "description") {
		if v, ok := in[k]; ok && v != nil {
			o[k] = v
		}
	}
	return o
}

func (c *Cloud) networkObject(id, name string, external bool, subnets []string, project string) object {
	now := stamp()
	return object{
		"id": id, "name": name, "description": "", "admin_state_up": true, "status": "ACTIVE", "subnets": subnets,
		"shared": external, "router:external": external, "mtu": 1500, "port_security_enabled": true,
		"availability_zones": []string{"nova"}, "tags": []string{}, "project_id": project, "tenant_id": project,
		"created_at": now, "updated_at": now, "revision_number": 0, "ipv4_address_scope": nil, "ipv6_address_scope": nil,
	}
}

func (c *Cloud) createNetwork(in object) (object, effect, *apiError) {
	if ext, _ := in["router:external"].(bool); ext {
		return nil, nil, &apiError{http.StatusForbidden, "PolicyNotAuthorized", `rule:create_network:router:external is disallowed by policy`}
	}
	o := c.networkObject(newID(), "", false, []string{}, c.projectID)
	for _, k := range []string{"name", "description", "admin_state_up", "mtu", "port_security_enabled"} {
		if v, ok := in[k]; ok && v != nil {
			o[k] = v
		}
	}
	c.networks.put(o)
	return o, nil, nil
}

func (c *Cloud) removeNetwork(o object) (effect, *apiError) {
	if o.str("id") == c.cfg.ExternalNetwork.ID {
		return nil, &apiError{http.StatusForbidden, "PolicyNotAuthorized", "rule:delete_network is disallowed by policy"}
	}
	for _, p := range c.ports.all() {
		if p.str("network_id") == o.str("id") && p.str("device_owner") != "network:dhcp" {
			return nil, conflict("NetworkInUse", fmt.Sprintf("Unable to complete operation on network %s. There are one or more ports still in use on the network.", o.str("id")))
		}
	}
	for _, s := range o.strings("subnets") {
		c.subnets.remove(s)
	}
	c.networks.remove(o.str("id"))
	return nil, nil
}

func (c *Cloud) createSubnet(in object) (object, effect, *apiError) {
	netID, _ := in["network_id"].(string)
	network, ok := c.networks.get(netID)
	if !ok {
		return nil, nil, notFound("Network", netID)
	}
	cidrText, _ := in["cidr"].(string)
	cidr, err := netip.ParsePrefix(cidrText)
	if err != nil || !cidr.Addr().Is4() || cidr.Masked() != cidr || cidr.Bits() > 30 {
		return nil, nil, badRequest(fmt.Sprintf("Invalid input for cidr. Reason: '%s' is not a valid IPv4 subnet.", cidrText))
	}
	for _, s := range c.subnets.all() {
		if s.str("network_id") != netID {
			continue
		}
		if other, err := netip.ParsePrefix(s.str("cidr")); err == nil && other.Overlaps(cidr) {
			return nil, nil, badRequest(fmt.Sprintf("Invalid input for operation: Requested subnet with cidr: %s for network: %s overlaps with another subnet.", cidr, netID))
		}
	}
	o := c.standard(in, "network_id", "dns_nameservers", "enable_dhcp", "host_routes", "gateway_ip", "allocation_pools")
	gateway := cidr.Addr().Next()
	if g, ok := in["gateway_ip"].(string); ok && g != "" {
		if gateway, err = netip.ParseAddr(g); err != nil || !cidr.Contains(gateway) {
			return nil, nil, badRequest(fmt.Sprintf("Invalid input for operation: Gateway is not valid on subnet %s.", cidr))
		}
	}
	o["gateway_ip"] = gateway.String()
	o["cidr"] = cidr.String()
	o["ip_version"] = 4
	if _, ok := in["allocation_pools"]; !ok {
		o["allocation_pools"] = []any{map[string]any{"start": gateway.Next().String(), "end": lastHost(cidr).String()}}
	}
	for k, v := range map[string]any{"dns_nameservers": []string{}, "enable_dhcp": true, "host_routes": []any{}} {
		if _, ok := o[k]; !ok {
			o[k] = v
		}
	}
	o["subnetpool_id"], o["ipv6_address_mode"], o["ipv6_ra_mode"], o["service_types"] = nil, nil, nil, []string{}
	c.subnets.put(o)
	network["subnets"] = append(network.strings("subnets"), o.str("id"))
	return o, nil, nil
}

func lastHost(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	bits := p.Bits()
	for i := range 4 {
		for b := range 8 {
			if i*8+b >= bits {
				a[i] |= 0x80 >> b
			}
		}
	}
	return netip.AddrFrom4(a).Prev()
}

func (c *Cloud) removeSubnet(o object) (effect, *apiError) {
	for _, p := range c.ports.all() {
		if p.str("device_owner") != "network:dhcp" && matchFixedIPs(p, []string{"subnet_id=" + o.str("id")}) {
			return nil, conflict("SubnetInUse", fmt.Sprintf("Unable to complete operation on subnet %s: One or more ports have an IP allocation from this subnet.", o.str("id")))
		}
	}
	if n, ok := c.networks.get(o.str("network_id")); ok {
		n["subnets"] = slices.DeleteFunc(n.strings("subnets"), func(s string) bool { return s == o.str("id") })
	}
	c.subnets.remove(o.str("id"))
	return nil, nil
}

// usedAddresses are the addresses of a subnet that are taken: its gateway, every port's, and the
// floating IPs (which Neutron also keeps as ports). Every subnet's servers run on the one Docker
// network, so an address taken in an overlapping subnet (another cluster's, with the same CIDR)
// is taken here too: two containers cannot share it, as two networks of a cloud could.
func (c *Cloud) usedAddresses(subnetID string) map[netip.Addr]bool {
	used := map[netip.Addr]bool{}
	self, ok := c.subnets.get(subnetID)
	if !ok {
		return used
	}
	cidr, _ := netip.ParsePrefix(self.str("cidr"))
	overlapping := map[string]bool{}
	for _, s := range c.subnets.all() {
		if other, err := netip.ParsePrefix(s.str("cidr")); err == nil && other.Overlaps(cidr) {
			overlapping[s.str("id")] = true
			if g, err := netip.ParseAddr(s.str("gateway_ip")); err == nil {
				used[g] = true
			}
		}
	}
	for _, p := range c.ports.all() {
		ips, _ := p["fixed_ips"].([]any)
		for _, ip := range ips {
			m, _ := ip.(map[string]any)
			if s, _ := m["subnet_id"].(string); overlapping[s] {
				if a, err := netip.ParseAddr(fmt.Sprint(m["ip_address"])); err == nil {
					used[a] = true
				}
			}
		}
	}
	for _, f := range c.floatingIPs.all() {
		if a, err := netip.ParseAddr(f.str("floating_ip_address")); err == nil {
			used[a] = true
		}
	}
	return used
}

// allocate takes the first free address of a subnet's pools.
func (c *Cloud) allocate(subnetID string) (netip.Addr, *apiError) {
	s, ok := c.subnets.get(subnetID)
	if !ok {
		return netip.Addr{}, notFound("Subnet", subnetID)
	}
	used := c.usedAddresses(subnetID)
	pools, _ := s["allocation_pools"].([]any)
	for _, p := range pools {
		m, _ := p.(map[string]any)
		start, err1 := netip.ParseAddr(fmt.Sprint(m["start"]))
		end, err2 := netip.ParseAddr(fmt.Sprint(m["end"]))
		if err1 != nil || err2 != nil {
			continue
		}
		for a := start; a.Compare(end) <= 0; a = a.Next() {
			if !used[a] {
				return a, nil
			}
		}
	}
	return netip.Addr{}, conflict("IpAddressGenerationFailure", fmt.Sprintf("No more IP addresses available on network %s.", s.str("network_id")))
}

// claim checks that an address asked for is in the subnet and free.
func (c *Cloud) claim(subnetID, addr string) (netip.Addr, *apiError) {
	s, ok := c.subnets.get(subnetID)
	if !ok {
		return netip.Addr{}, notFound("Subnet", subnetID)
	}
	a, err := netip.ParseAddr(addr)
	cidr, _ := netip.ParsePrefix(s.str("cidr"))
	if err != nil || !cidr.Contains(a) {
		return netip.Addr{}, badRequest(fmt.Sprintf("IP address %s is not a valid IP for the specified subnet.", addr))
	}
	if c.usedAddresses(subnetID)[a] {
		return netip.Addr{}, conflict("IpAddressAlreadyAllocated", fmt.Sprintf("IP address %s already allocated in subnet %s", addr, subnetID))
	}
	return a, nil
}

func macAddress() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("fa:16:3e:%02x:%02x:%02x", b[0], b[1], b[2])
}

func (c *Cloud) createPort(in object) (object, effect, *apiError) {
	netID, _ := in["network_id"].(string)
	network, ok := c.networks.get(netID)
	if !ok {
		return nil, nil, notFound("Network", netID)
	}
	o := c.standard(in, "network_id", "device_id", "device_owner", "admin_state_up", "allowed_address_pairs",
		"port_security_enabled", "binding:vnic_type", "binding:host_id", "binding:profile", "dns_name", "value_specs")
	var fixed []any
	requested, _ := in["fixed_ips"].([]any)
	if len(requested) == 0 {
		for _, sid := range network.strings("subnets") {
			requested = append(requested, map[string]any{"subnet_id": sid})
			break
		}
	}
	for _, r := range requested {
		m, _ := r.(map[string]any)
		sid, _ := m["subnet_id"].(string)
		want, _ := m["ip_address"].(string)
		if sid == "" {
			return nil, nil, badRequest("Invalid input for operation: IP allocation requires subnet_id or ip_address.")
		}
		if s, ok := c.subnets.get(sid); !ok || s.str("network_id") != netID {
			return nil, nil, badRequest(fmt.Sprintf("Invalid input for operation: Failed to create port on network %s, because fixed_ips included invalid subnet %s.", netID, sid))
		}
		var a netip.Addr
		var err *apiError
		if want != "" {
			a, err = c.claim(sid, want)
		} else {
			a, err = c.allocate(sid)
		}
		if err != nil {
			return nil, nil, err
		}
		fixed = append(fixed, map[string]any{"subnet_id": sid, "ip_address": a.String()})
	}
	if fixed == nil {
		fixed = []any{}
	}
	o["fixed_ips"] = fixed
	o["mac_address"] = macAddress()
	o["status"] = "DOWN"
	for k, v := range map[string]any{"device_id": "", "device_owner": "", "admin_state_up": true, "allowed_address_pairs": []any{},
		"port_security_enabled": true, "binding:vnic_type": "normal", "binding:host_id": "", "binding:vif_type": "unbound",
		"binding:profile": map[string]any{}, "binding:vif_details": map[string]any{}, "extra_dhcp_opts": []any{}, "dns_name": ""} {
		if _, ok := o[k]; !ok {
			o[k] = v
		}
	}
	groups, given := in["security_groups"]
	switch {
	case given:
		ids := object{"g": groups}.strings("g")
		for _, g := range ids {
			if _, ok := c.secGroups.get(g); !ok {
				return nil, nil, notFound("Security group", g)
			}
		}
		o["security_groups"] = ids
	case strings.HasPrefix(o.str("device_owner"), "network:") || o["port_security_enabled"] == false:
		o["security_groups"] = []string{}
	default:
		o["security_groups"] = []string{c.defaultSecurityGroup()}
	}
	c.ports.put(o)
	return o, nil, nil
}

func (c *Cloud) defaultSecurityGroup() string {
	for _, g := range c.secGroups.all() {
		if g.str("name") == "default" {
			return g.str("id")
		}
	}
	return ""
}

func (c *Cloud) updatePort(o, in object) (effect, *apiError) {
	for k, v := range in {
		switch k {
		case "name", "description", "admin_state_up", "allowed_address_pairs", "device_id", "device_owner",
			"binding:host_id", "binding:profile", "dns_name", "port_security_enabled":
			o[k] = v
		case "security_groups":
			ids := object{"g": v}.strings("g")
			for _, g := range ids {
				if _, ok := c.secGroups.get(g); !ok {
					return nil, notFound("Security group", g)
				}
			}
			o[k] = ids
		default:
			return nil, badRequest(fmt.Sprintf("Cannot update read-only attribute %s", k))
		}
	}
	return nil, nil
}

func (c *Cloud) removePort(o object) (effect, *apiError) {
	if owner := o.str("device_owner"); owner == "network:router_interface" || owner == "network:router_gateway" || owner == "network:floatingip" {
		return nil, conflict("PortInUse", fmt.Sprintf("Port %s cannot be deleted directly via the port API: has device owner %s.", o.str("id"), owner))
	}
	var fx []effect
	for _, f := range c.floatingIPs.all() {
		if f.str("port_id") == o.str("id") {
			fx = append(fx, c.disassociate(f))
		}
	}
	c.ports.remove(o.str("id"))
	return all(fx), nil
}

func all(fx []effect) effect {
	return func(ctx context.Context) {
		for _, f := range fx {
			if f != nil {
				f(ctx)
			}
		}
	}
}

// createSecurityGroup makes a group with Neutron's two default egress rules.
func (c *Cloud) createSecurityGroup(name, description string) object {
	o, _, _ := c.createSecurityGroupFrom(object{"name": name, "description": description})
	return o
}

func (c *Cloud) createSecurityGroupFrom(in object) (object, effect, *apiError) {
	o := c.standard(in, "stateful")
	if _, ok := o["stateful"]; !ok {
		o["stateful"] = true
	}
	c.secGroups.put(o)
	for _, eth := range []string{"IPv4", "IPv6"} {
		if _, _, err := c.createRule(object{"security_group_id": o.str("id"), "direction": "egress", "ethertype": eth}); err != nil {
			return nil, nil, err
		}
	}
	o["security_group_rules"] = c.rulesOf(o.str("id"))
	return o, nil, nil
}

func (c *Cloud) rulesOf(groupID string) []any {
	out := []any{}
	for _, r := range c.secRules.all() {
		if r.str("security_group_id") == groupID {
			out = append(out, r)
		}
	}
	return out
}

func (c *Cloud) removeSecurityGroup(o object) (effect, *apiError) {
	if o.str("name") == "default" {
		return nil, conflict("SecurityGroupCannotRemoveDefault", "Insufficient rights for removing default security group.")
	}
	for _, p := range c.ports.all() {
		if slices.Contains(p.strings("security_groups"), o.str("id")) {
			return nil, conflict("SecurityGroupInUse", fmt.Sprintf("Security Group %s in use.", o.str("id")))
		}
	}
	for _, r := range c.secRules.all() {
		if r.str("security_group_id") == o.str("id") || r.str("remote_group_id") == o.str("id") {
			c.secRules.remove(r.str("id"))
			c.refreshRules(r.str("security_group_id"))
		}
	}
	c.secGroups.remove(o.str("id"))
	return nil, nil
}

func (c *Cloud) refreshRules(groupID string) {
	if g, ok := c.secGroups.get(groupID); ok {
		g["security_group_rules"] = c.rulesOf(groupID)
	}
}

var ruleKeys = []string{"direction", "ethertype", "protocol", "port_range_min", "port_range_max", "remote_ip_prefix", "remote_group_id", "remote_address_group_id"}

func (c *Cloud) createRule(in object) (object, effect, *apiError) {
	gid, _ := in["security_group_id"].(string)
	if _, ok := c.secGroups.get(gid); !ok {
		return nil, nil, notFound("Security group", gid)
	}
	if d, _ := in["direction"].(string); d != "ingress" && d != "egress" {
		return nil, nil, badRequest(fmt.Sprintf("Invalid input for direction. Reason: %q is not in ['ingress', 'egress'].", d))
	}
	if rg, _ := in["remote_group_id"].(string); rg != "" {
		if _, ok := c.secGroups.get(rg); !ok {
			return nil, nil, notFound("Security group", rg)
		}
	}
	o := c.standard(in, append([]string{"security_group_id"}, ruleKeys...)...)
	delete(o, "name")
	if _, ok := o["ethertype"]; !ok {
		o["ethertype"] = "IPv4"
	}
	for _, k := range ruleKeys {
		if _, ok := o[k]; !ok {
			o[k] = nil
		}
	}
	for _, r := range c.secRules.all() {
		if r.str("security_group_id") == gid && sameRule(r, o) {
			return nil, nil, conflict("SecurityGroupRuleExists", fmt.Sprintf("Security group rule already exists. Rule id is %s.", r.str("id")))
		}
	}
	c.secRules.put(o)
	c.refreshRules(gid)
	return o, nil, nil
}

func sameRule(a, b object) bool {
	for _, k := range ruleKeys {
		if scalar(a[k]) != scalar(b[k]) {
			return false
		}
	}
	return true
}

func (c *Cloud) removeRule(o object) (effect, *apiError) {
	c.secRules.remove(o.str("id"))
	c.refreshRules(o.str("security_group_id"))
	return nil, nil
}

func (c *Cloud) createRouter(in object) (object, effect, *apiError) {
	o := c.standard(in, "admin_state_up")
	o["status"] = "ACTIVE"
	o["routes"] = []any{}
	o["external_gateway_info"] = nil
	o["availability_zones"] = []string{"nova"}
	if _, ok := o["admin_state_up"]; !ok {
		o["admin_state_up"] = true
	}
	if gw, ok := in["external_gateway_info"].(map[string]any); ok {
		if err := c.setGateway(o, gw); err != nil {
			return nil, nil, err
		}
	}
	c.routers.put(o)
	return o, nil, nil
}

func (c *Cloud) setGateway(router object, gw map[string]any) *apiError {
	// Checked before anything changes: a refused gateway leaves the old one.
	netID, _ := gw["network_id"].(string)
	if gw != nil {
		n, ok := c.networks.get(netID)
		if !ok {
			return notFound("Network", netID)
		}
		if ext, _ := n["router:external"].(bool); !ext {
			return badRequest(fmt.Sprintf("Bad router request: Network %s is not an external network.", netID))
		}
	}
	// The old gateway port goes first.
	for _, p := range c.ports.all() {
		if p.str("device_id") == router.str("id") && p.str("device_owner") == "network:router_gateway" {
			c.ports.remove(p.str("id"))
		}
	}
	router["external_gateway_info"] = nil
	if gw == nil {
		return nil
	}
	port, _, err := c.createPort(object{"network_id": netID, "device_id": router.str("id"), "device_owner": "network:router_gateway"})
	if err != nil {
		return err
	}
	port["status"] = "ACTIVE"
	snat := true
	if v, ok := gw["enable_snat"].(bool); ok {
		snat = v
	}
	router["external_gateway_info"] = map[string]any{"network_id": netID, "enable_snat": snat, "external_fixed_ips": port["fixed_ips"]}
	return nil
}

func (c *Cloud) updateRouter(o, in object) (effect, *apiError) {
	for k, v := range in {
		switch k {
		case "name", "description", "admin_state_up", "routes":
			o[k] = v
		case "external_gateway_info":
			gw, _ := v.(map[string]any)
			if err := c.setGateway(o, gw); err != nil {
				return nil, err
			}
		default:
			return nil, badRequest(fmt.Sprintf("Cannot update read-only attribute %s", k))
		}
	}
	return nil, nil
}

func (c *Cloud) removeRouter(o object) (effect, *apiError) {
	for _, p := range c.ports.all() {
		if p.str("device_id") == o.str("id") && p.str("device_owner") == "network:router_interface" {
			return nil, conflict("RouterInUse", fmt.Sprintf("Router %s still has ports", o.str("id")))
		}
	}
	if err := c.setGateway(o, nil); err != nil {
		return nil, err
	}
	c.routers.remove(o.str("id"))
	return nil, nil
}

// routerInterface is add_router_interface and remove_router_interface, by subnet or by port.
func (c *Cloud) routerInterface(add bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			SubnetID string `json:"subnet_id"`
			PortID   string `json:"port_id"`
		}
		if !decode(w, r, &in, func(w http.ResponseWriter, s int, m string) { neutronError(w, s, "BadRequest", m) }) {
			return
		}
		c.mu.Lock()
		out, err := c.changeInterface(r.PathValue("id"), in.SubnetID, in.PortID, add)
		c.mu.Unlock()
		if err != nil {
			c.neutronFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func (c *Cloud) changeInterface(routerID, subnetID, portID string, add bool) (map[string]any, *apiError) {
	router, ok := c.routers.get(routerID)
	if !ok {
		return nil, notFound("Router", routerID)
	}
	var port object
	for _, p := range c.ports.all() {
		if p.str("device_id") != routerID || p.str("device_owner") != "network:router_interface" {
			continue
		}
		if (portID != "" && p.str("id") == portID) || (subnetID != "" && matchFixedIPs(p, []string{"subnet_id=" + subnetID})) {
			port = p
		}
	}
	if add {
		if port != nil {
			return nil, badRequest(fmt.Sprintf("Bad router request: Router already has a port on subnet %s.", subnetID))
		}
		switch {
		case portID != "":
			p, ok := c.ports.get(portID)
			if !ok {
				return nil, notFound("Port", portID)
			}
			if p.str("device_id") != "" {
				return nil, conflict("PortInUse", fmt.Sprintf("Port %s is in use by %s.", portID, p.str("device_id")))
			}
			p["device_id"], p["device_owner"], p["status"] = routerID, "network:router_interface", "ACTIVE"
			port = p
		default:
			s, ok := c.subnets.get(subnetID)
			if !ok {
				return nil, notFound("Subnet", subnetID)
			}
			// The port takes the subnet's gateway address, which no allocation ever hands out.
			p, _, err := c.createPort(object{"network_id": s.str("network_id"), "device_id": routerID, "device_owner": "network:router_interface",
				"fixed_ips": []any{map[string]any{"subnet_id": subnetID}}})
			if err != nil {
				return nil, err
			}
			p["fixed_ips"] = []any{map[string]any{"subnet_id": subnetID, "ip_address": s.str("gateway_ip")}}
			p["status"] = "ACTIVE"
			port = p
		}
	} else {
		if port == nil {
			what := subnetID
			if portID != "" {
				what = portID
			}
			return nil, notFound("Router interface for", what)
		}
		for _, f := range c.floatingIPs.all() {
			if f.str("router_id") == routerID && f.str("port_id") != "" {
				if fp, ok := c.ports.get(f.str("port_id")); ok && fp.str("network_id") == port.str("network_id") {
					return nil, conflict("RouterInterfaceInUseByFloatingIP", fmt.Sprintf("Router interface for subnet %s on router %s cannot be deleted, as it is required by one or more floating IPs.", subnetID, routerID))
				}
			}
		}
		c.ports.remove(port.str("id"))
	}
	touch(router)
	sid := ""
	if ips, _ := port["fixed_ips"].([]any); len(ips) > 0 {
		sid, _ = ips[0].(map[string]any)["subnet_id"].(string)
	}
	return map[string]any{"id": routerID, "subnet_id": sid, "subnet_ids": []string{sid}, "port_id": port.str("id"),
		"network_id": port.str("network_id"), "tenant_id": c.projectID, "project_id": c.projectID}, nil
}

func (c *Cloud) createFloatingIP(in object) (object, effect, *apiError) {
	netID, _ := in["floating_network_id"].(string)
	n, ok := c.networks.get(netID)
	if !ok {
		return nil, nil, notFound("Network", netID)
	}
	if ext, _ := n["router:external"].(bool); !ext {
		return nil, nil, badRequest(fmt.Sprintf("Bad floatingip request: Network %s is not a valid external network.", netID))
	}
	subnets := n.strings("subnets")
	if len(subnets) == 0 {
		return nil, nil, badRequest(fmt.Sprintf("Bad floatingip request: Network %s does not contain any IPv4 subnet.", netID))
	}
	var addr netip.Addr
	var err *apiError
	if want, _ := in["floating_ip_address"].(string); want != "" {
		addr, err = c.claim(subnets[0], want)
	} else {
		addr, err = c.allocate(subnets[0])
	}
	if err != nil {
		return nil, nil, err
	}
	o := c.standard(in, "floating_network_id")
	delete(o, "name")
	o["floating_ip_address"] = addr.String()
	o["port_id"], o["fixed_ip_address"], o["router_id"], o["status"] = nil, nil, nil, "DOWN"
	o["port_details"], o["dns_name"], o["dns_domain"], o["qos_policy_id"] = nil, "", "", nil
	c.floatingIPs.put(o)
	var fx effect
	if p, _ := in["port_id"].(string); p != "" {
		if fx, err = c.associate(o, p, in); err != nil {
			c.floatingIPs.remove(o.str("id"))
			return nil, nil, err
		}
	}
	return o, fx, nil
}

// updateFloatingIP changes a floating IP's description or port. An update that names no port_id
// disassociates it, as Neutron does (its update always sets the association: CAPO v0.13
// disassociates with an empty update, gophercloud leaving out a nil port_id).
func (c *Cloud) updateFloatingIP(o, in object) (effect, *apiError) {
	var fx []effect
	if _, ok := in["port_id"]; !ok {
		in = maps.Clone(in)
		in["port_id"] = nil
	}
	for k, v := range in {
		switch k {
		case "description":
			o[k] = v
		case "port_id":
			if o.str("port_id") != "" {
				fx = append(fx, c.disassociate(o))
			}
			if p, _ := v.(string); p != "" {
				f, err := c.associate(o, p, in)
				if err != nil {
					return nil, err
				}
				fx = append(fx, f)
			}
		case "fixed_ip_address":
		default:
			return nil, badRequest(fmt.Sprintf("Cannot update read-only attribute %s", k))
		}
	}
	return all(fx), nil
}

// associate puts a floating IP on a port: the port's network must reach the floating IP's
// external network through a router, as in Neutron; a server behind the port gets the address.
func (c *Cloud) associate(fip object, portID string, in object) (effect, *apiError) {
	port, ok := c.ports.get(portID)
	if !ok {
		return nil, notFound("Port", portID)
	}
	ips, _ := port["fixed_ips"].([]any)
	if len(ips) == 0 {
		return nil, badRequest(fmt.Sprintf("Bad floatingip request: Port %s does not have any IPv4 address.", portID))
	}
	first, _ := ips[0].(map[string]any)
	fixed, _ := first["ip_address"].(string)
	if want, _ := in["fixed_ip_address"].(string); want != "" {
		fixed = want
	}
	routerID := ""
	for _, rp := range c.ports.all() {
		if rp.str("device_owner") == "network:router_interface" && rp.str("network_id") == port.str("network_id") {
			if r, ok := c.routers.get(rp.str("device_id")); ok {
				if gw, _ := r["external_gateway_info"].(map[string]any); gw != nil && gw["network_id"] == fip.str("floating_network_id") {
					routerID = r.str("id")
				}
			}
		}
	}
	if routerID == "" {
		return nil, &apiError{http.StatusNotFound, "ExternalGatewayForFloatingIPNotFound", fmt.Sprintf("External network %s is not reachable from subnet %v.  Therefore, cannot associate Port %s with a Floating IP.", fip.str("floating_network_id"), first["subnet_id"], portID)}
	}
	for _, other := range c.floatingIPs.all() {
		if other.str("id") != fip.str("id") && other.str("port_id") == portID && other.str("fixed_ip_address") == fixed {
			return nil, conflict("FloatingIPPortAlreadyAssociated", fmt.Sprintf("Cannot associate floating IP %s with port %s using fixed IP %s, as that fixed IP already has a floating IP on external network %s.", fip.str("floating_ip_address"), portID, fixed, fip.str("floating_network_id")))
		}
	}
	fip["port_id"], fip["fixed_ip_address"], fip["router_id"], fip["status"] = portID, fixed, routerID, "ACTIVE"
	return c.addressEffect(port, netip.MustParseAddr(fip.str("floating_ip_address")), true), nil
}

func (c *Cloud) disassociate(fip object) effect {
	port, _ := c.ports.get(fip.str("port_id"))
	fip["port_id"], fip["fixed_ip_address"], fip["router_id"], fip["status"] = nil, nil, nil, "DOWN"
	if port == nil {
		return nil
	}
	return c.addressEffect(port, netip.MustParseAddr(fip.str("floating_ip_address")), false)
}

// addressEffect puts a floating IP on what is behind a port, or takes it away: a server, or a
// load balancer at its VIP port.
func (c *Cloud) addressEffect(port object, addr netip.Addr, add bool) effect {
	owner, device := port.str("device_owner"), port.str("device_id")
	switch {
	case strings.HasPrefix(owner, "compute:") && c.cfg.Machines != nil:
		return func(ctx context.Context) {
			f := c.cfg.Machines.RemoveAddress
			if add {
				f = c.cfg.Machines.AddAddress
			}
			if err := f(ctx, device, addr); err != nil {
				c.log.Error("change a floating IP of a server", "server", device, "address", addr, "add", add, "err", err)
			}
		}
	case owner == "Octavia" && c.cfg.Balancers != nil:
		lbID := strings.TrimPrefix(device, "lb-")
		return func(ctx context.Context) {
			f := c.cfg.Balancers.RemoveAddress
			if add {
				f = c.cfg.Balancers.AddAddress
			}
			if err := f(ctx, lbID, addr); err != nil {
				c.log.Error("change a floating IP of a load balancer", "loadbalancer", lbID, "address", addr, "add", add, "err", err)
			}
		}
	}
	return nil
}

func (c *Cloud) removeFloatingIP(o object) (effect, *apiError) {
	var fx effect
	if o.str("port_id") != "" {
		fx = c.disassociate(o)
	}
	c.floatingIPs.remove(o.str("id"))
	return fx, nil
}

// floatingIPsOf are the floating IPs on a server's ports.
func (c *Cloud) floatingIPsOf(serverID string) []netip.Addr {
	var out []netip.Addr
	for _, f := range c.floatingIPs.all() {
		if p, ok := c.ports.get(f.str("port_id")); ok && p.str("device_id") == serverID {
			out = append(out, netip.MustParseAddr(f.str("floating_ip_address")))
		}
	}
	return out
}
