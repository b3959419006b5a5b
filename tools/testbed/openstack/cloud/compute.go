package cloud

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// novaMaxMicroversion is the newest compute microversion the cloud claims; the server views
// follow 2.47 and later (flavor details inline, tags).
const novaMaxMicroversion = "2.96"

func novaError(w http.ResponseWriter, status int, msg string) {
	key := map[int]string{400: "badRequest", 403: "forbidden", 404: "itemNotFound", 409: "conflictingRequest",
		413: "overLimit", 500: "computeFault", 503: "serviceUnavailable"}[status]
	if key == "" {
		key = "computeFault"
	}
	writeJSON(w, status, map[string]any{key: map[string]any{"code": status, "message": msg}})
}

//nolint:funlen // a table of Nova's routes, one line or small handler each: a reader wants it whole
func (c *Cloud) computeRoutes(mux *http.ServeMux) {
	version := map[string]any{"id": "v2.1", "status": "CURRENT", "version": novaMaxMicroversion, "min_version": "2.1",
		"updated": "2013-07-23T11:33:21Z", "links": c.links("compute/v2.1/")}
	mux.HandleFunc("GET /compute/{$}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"versions": []any{version}})
	})
	mux.HandleFunc("GET /compute/v2.1/{$}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"version": version})
	})
	mux.HandleFunc("GET /compute/v2.1", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"version": version})
	})
	g := c.guarded
	mux.HandleFunc("GET /compute/v2.1/flavors", g(c.listFlavors(false)))
	mux.HandleFunc("GET /compute/v2.1/flavors/detail", g(c.listFlavors(true)))
	mux.HandleFunc("GET /compute/v2.1/flavors/{id}", g(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		f, ok := c.flavors.get(r.PathValue("id"))
		if ok {
			f = f.clone()
		}
		c.mu.Unlock()
		if !ok {
			novaError(w, http.StatusNotFound, fmt.Sprintf("Flavor %s could not be found.", r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"flavor": f})
	}))
	mux.HandleFunc("GET /compute/v2.1/flavors/{id}/os-extra_specs", g(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"extra_specs": map[string]any{}})
	}))
	zones := func(w http.ResponseWriter, _ *http.Request) {
		var info []any
		for _, z := range c.cfg.AvailabilityZones {
			info = append(info, map[string]any{"zoneName": z, "zoneState": map[string]any{"available": true}, "hosts": nil})
		}
		writeJSON(w, http.StatusOK, map[string]any{"availabilityZoneInfo": info})
	}
	mux.HandleFunc("GET /compute/v2.1/os-availability-zone", g(zones))
	mux.HandleFunc("GET /compute/v2.1/os-availability-zone/detail", g(zones))
	mux.HandleFunc("GET /compute/v2.1/os-keypairs", g(func(w http.ResponseWriter, _ *http.Request) {
		c.mu.Lock()
		var out []any
		for _, k := range c.keypairs.all() {
			out = append(out, map[string]any{"keypair": k.clone()})
		}
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"keypairs": append([]any{}, out...)})
	}))
	mux.HandleFunc("GET /compute/v2.1/os-keypairs/{name}", g(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		k, ok := c.keypairs.get(r.PathValue("name"))
		if ok {
			k = k.clone()
		}
		c.mu.Unlock()
		if !ok {
			novaError(w, http.StatusNotFound, fmt.Sprintf("Keypair %s not found for user %s", r.PathValue("name"), c.userID))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"keypair": k})
	}))
	mux.HandleFunc("POST /compute/v2.1/servers", g(c.createServer))
	mux.HandleFunc("GET /compute/v2.1/servers", g(c.listServers(false)))
	mux.HandleFunc("GET /compute/v2.1/servers/detail", g(c.listServers(true)))
	mux.HandleFunc("GET /compute/v2.1/servers/{id}", g(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		s, ok := c.servers.get(r.PathValue("id"))
		var v object
		if ok {
			v = c.serverView(s)
		}
		c.mu.Unlock()
		if !ok {
			novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"server": v})
	}))
	mux.HandleFunc("DELETE /compute/v2.1/servers/{id}", g(c.deleteServer))
	mux.HandleFunc("POST /compute/v2.1/servers/{id}/action", g(c.serverAction))
	mux.HandleFunc("GET /compute/v2.1/servers/{id}/os-interface", g(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.servers.get(r.PathValue("id")); !ok {
			novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", r.PathValue("id")))
			return
		}
		out := []any{}
		for _, p := range c.ports.all() {
			if p.str("device_id") == r.PathValue("id") {
				out = append(out, map[string]any{"port_id": p.str("id"), "net_id": p.str("network_id"), "fixed_ips": p["fixed_ips"],
					"mac_addr": p.str("mac_address"), "port_state": p.str("status"), "tag": nil})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"interfaceAttachments": out})
	}))
	mux.HandleFunc("GET /compute/v2.1/servers/{id}/tags", g(c.serverTags(func(o object) int { return http.StatusOK })))
	mux.HandleFunc("GET /compute/v2.1/servers/{id}/metadata", g(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		s, ok := c.servers.get(r.PathValue("id"))
		var md any
		if ok {
			md = s.clone()["metadata"]
		}
		c.mu.Unlock()
		if !ok {
			novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"metadata": md})
	}))
	mux.HandleFunc("GET /compute/v2.1/os-server-groups", g(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"server_groups": []any{}})
	}))
}

func (c *Cloud) listFlavors(detail bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		out := []any{}
		for _, f := range c.flavors.all() {
			if detail {
				out = append(out, f.clone())
			} else {
				out = append(out, map[string]any{"id": f.str("id"), "name": f.str("name"), "links": f["links"]})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"flavors": out})
	}
}

type serverRequest struct {
	Server serverFields `json:"server"`
}

// serverFields are the fields of Nova's POST /servers the cloud reads.
type serverFields struct {
	Name             string                  `json:"name"`
	ImageRef         string                  `json:"imageRef"`
	FlavorRef        string                  `json:"flavorRef"`
	KeyName          string                  `json:"key_name"`
	UserData         string                  `json:"user_data"`
	Metadata         map[string]string       `json:"metadata"`
	Tags             []string                `json:"tags"`
	AvailabilityZone string                  `json:"availability_zone"`
	ConfigDrive      any                     `json:"config_drive"`
	Networks         any                     `json:"networks"`
	SecurityGroups   []struct{ Name string } `json:"security_groups"`
	BlockDevices     []struct {
		SourceType string `json:"source_type"`
		UUID       string `json:"uuid"`
		BootIndex  any    `json:"boot_index"`
	} `json:"block_device_mapping_v2"`
	Description *string `json:"description"`
}

// createServer is Nova's POST /servers: it checks what a scheduler would (flavor, image, key
// pair, zone, ports, quota), binds the ports and leaves the server in BUILD; the boot goes on in
// the background.
func (c *Cloud) createServer(w http.ResponseWriter, r *http.Request) {
	var req serverRequest
	if !decode(w, r, &req, func(w http.ResponseWriter, s int, m string) { novaError(w, s, m) }) {
		return
	}
	in := req.Server
	c.mu.Lock()
	s, err := c.newServer(in)
	var v object
	if err == nil {
		v = object{"id": s.str("id"), "links": s["links"], "OS-DCF:diskConfig": "MANUAL", "security_groups": s["security_groups"], "adminPass": newID()[:12]}
	}
	c.mu.Unlock()
	if err != nil {
		novaError(w, err.status, err.msg)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"server": v})
}

//nolint:funlen // Nova's checks of one request in the order Nova makes them, then the server: one story
func (c *Cloud) newServer(in serverFields) (object, *apiError) {
	bad := func(msg string) *apiError { return &apiError{status: http.StatusBadRequest, msg: msg} }
	if c.closed {
		return nil, &apiError{status: http.StatusServiceUnavailable, msg: "The cloud is shutting down."}
	}
	if strings.TrimSpace(in.Name) == "" {
		return nil, bad("Invalid input for field/attribute name. Value: . '' is too short")
	}
	flavor, ok := c.flavors.get(path.Base(in.FlavorRef))
	if !ok {
		return nil, bad(fmt.Sprintf("Flavor %s could not be found.", in.FlavorRef))
	}
	imageID := path.Base(in.ImageRef)
	for _, b := range in.BlockDevices {
		if b.SourceType == "image" && fmt.Sprint(b.BootIndex) == "0" {
			imageID = b.UUID
		}
	}
	image, ok := c.images.get(imageID)
	if !ok {
		return nil, bad("Image " + imageID + " could not be found.")
	}
	if in.KeyName != "" {
		if _, ok := c.keypairs.get(in.KeyName); !ok {
			return nil, bad("Invalid key_name provided.")
		}
	}
	zone := c.cfg.AvailabilityZones[0]
	if in.AvailabilityZone != "" {
		if !slices.Contains(c.cfg.AvailabilityZones, in.AvailabilityZone) {
			return nil, bad(fmt.Sprintf("The requested availability zone is not available (zone %q).", in.AvailabilityZone))
		}
		zone = in.AvailabilityZone
	}
	var userData []byte
	if in.UserData != "" {
		var err error
		if userData, err = base64.StdEncoding.DecodeString(in.UserData); err != nil {
			return nil, bad("User data needs to be valid base 64.")
		}
	}
	if err := c.faults.overQuota("instances", c.servers.len()); err != nil {
		used := c.servers.len()
		return nil, &apiError{status: http.StatusForbidden, msg: fmt.Sprintf("Quota exceeded for instances: Requested 1, but already used %d of %d instances", used, c.faults.quotas["instances"])}
	}
	id := newID()
	ports, err := c.serverPorts(in.Networks)
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		p["device_id"], p["device_owner"], p["status"] = id, "compute:nova", "ACTIVE"
		p["binding:host_id"], p["binding:vif_type"] = "testbed", "ovs"
	}
	groups := []any{}
	for _, g := range in.SecurityGroups {
		groups = append(groups, map[string]any{"name": g.Name})
	}
	if len(groups) == 0 {
		groups = append(groups, map[string]any{"name": "default"})
	}
	md := map[string]string{}
	for k, v := range in.Metadata {
		md[k] = v
	}
	now := stamp()
	s := object{
		"id": id, "name": in.Name, "status": "BUILD", "tenant_id": c.projectID, "user_id": c.userID, "metadata": md,
		"hostId": "testbed", "image": map[string]any{"id": image.str("id")}, "flavor": flavorView(flavor),
		"created": now, "updated": now, "accessIPv4": "", "accessIPv6": "", "links": c.links("compute/v2.1/servers/" + id),
		"OS-DCF:diskConfig": "MANUAL", "progress": 0, "OS-EXT-AZ:availability_zone": zone, "config_drive": "",
		"key_name": in.KeyName, "OS-SRV-USG:launched_at": nil, "OS-SRV-USG:terminated_at": nil,
		"security_groups": groups, "OS-EXT-STS:task_state": "scheduling", "OS-EXT-STS:vm_state": "building",
		"OS-EXT-STS:power_state": 0, "os-extended-volumes:volumes_attached": []any{}, "locked": false,
		"tags": uniq(in.Tags), "description": in.Description, "host_status": "UP", "OS-EXT-SRV-ATTR:hostname": hostname(in.Name),
	}
	c.servers.put(s)
	spec := MachineSpec{
		ServerID: id, Name: in.Name, DockerImage: image.str("docker_image"), UserData: userData,
		Metadata: map[string]any{"instance_id": id, "uuid": id, "name": in.Name, "local_hostname": hostname(in.Name),
			"hostname": hostname(in.Name), "availability_zone": zone, "project_id": c.projectID, "meta": md},
	}
	if len(ports) > 0 {
		if ips, _ := ports[0]["fixed_ips"].([]any); len(ips) > 0 {
			spec.FixedIP, _ = netip.ParseAddr(fmt.Sprint(ips[0].(map[string]any)["ip_address"]))
		}
	}
	failure := c.faults.serverFailure(in.Name)
	delay := c.faults.bootDelay
	ctx, cancel := context.WithCancel(c.ctx)
	b := booting{cancel: cancel, done: make(chan struct{})}
	c.booting[id] = b
	c.booted.Add(1)
	go func() {
		defer c.booted.Done()
		defer close(b.done)
		c.boot(ctx, spec, failure, delay)
	}()
	return s, nil
}

// serverPorts are the ports of a new server: the given ones, or one made on each network asked
// for; a refusal leaves no port made for it behind.
func (c *Cloud) serverPorts(networks any) ([]object, *apiError) {
	var ports, made []object
	fail := func(e *apiError) ([]object, *apiError) {
		for _, p := range made {
			c.ports.remove(p.str("id"))
		}
		return nil, e
	}
	nets, _ := networks.([]any)
	for _, n := range nets {
		m, _ := n.(map[string]any)
		if p, _ := m["port"].(string); p != "" {
			port, ok := c.ports.get(p)
			if !ok {
				return fail(&apiError{status: http.StatusBadRequest, msg: fmt.Sprintf("Port id %s could not be found.", p)})
			}
			if port.str("device_id") != "" {
				return fail(&apiError{status: http.StatusConflict, msg: fmt.Sprintf("Port %s is still in use.", p)})
			}
			ports = append(ports, port)
			continue
		}
		if u, _ := m["uuid"].(string); u != "" {
			port, _, err := c.createPort(object{"network_id": u})
			if err != nil {
				return fail(&apiError{status: err.status, msg: err.msg})
			}
			port["nova_created"] = true
			made = append(made, port)
			ports = append(ports, port)
		}
	}
	return ports, nil
}

func hostname(name string) string {
	h := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9-]+`).ReplaceAllString(name, "-"))
	return strings.Trim(h, "-")
}

func flavorView(f object) map[string]any {
	return map[string]any{"vcpus": f["vcpus"], "ram": f["ram"], "disk": f["disk"], "ephemeral": 0, "swap": 0,
		"original_name": f.str("name"), "extra_specs": map[string]any{}}
}

// boot takes a server from BUILD to ACTIVE (its machine runs) or to ERROR with a fault, as a
// compute host does; faults injected make it slow or fail.
func (c *Cloud) boot(ctx context.Context, spec MachineSpec, failure string, delay time.Duration) {
	defer func() {
		c.mu.Lock()
		delete(c.booting, spec.ServerID)
		c.mu.Unlock()
	}()
	c.setState(spec.ServerID, "BUILD", "spawning", "building", 0, "")
	if delay > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
	if failure != "" {
		c.setState(spec.ServerID, "ERROR", "", "error", 0, failure)
		return
	}
	if c.cfg.Machines != nil {
		c.mu.Lock()
		spec.Addresses = c.floatingIPsOf(spec.ServerID)
		c.mu.Unlock()
		if err := c.cfg.Machines.Boot(ctx, spec); err != nil {
			if ctx.Err() != nil {
				return
			}
			c.log.Error("boot a server", "server", spec.ServerID, "name", spec.Name, "err", err)
			c.setState(spec.ServerID, "ERROR", "", "error", 0, "Build of instance "+spec.ServerID+" aborted: "+err.Error())
			return
		}
	}
	c.setState(spec.ServerID, "ACTIVE", "", "active", 1, "")
}

func (c *Cloud) setState(id, status, task, vm string, power int, fault string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers.get(id)
	if !ok || s.str("OS-EXT-STS:task_state") == "deleting" {
		return
	}
	s["status"], s["OS-EXT-STS:vm_state"], s["OS-EXT-STS:power_state"] = status, vm, power
	if task == "" {
		s["OS-EXT-STS:task_state"] = nil
	} else {
		s["OS-EXT-STS:task_state"] = task
	}
	if status == "ACTIVE" {
		s["OS-SRV-USG:launched_at"] = time.Now().UTC().Format("2006-01-02T15:04:05.000000")
	}
	if fault != "" {
		s["fault"] = map[string]any{"code": 500, "message": fault, "created": stamp()}
	}
	touch(s)
}

// serverView is a server as Nova shows it: its addresses come from its ports and their floating IPs.
func (c *Cloud) serverView(s object) object {
	v := s.clone()
	addresses := map[string]any{}
	for _, p := range c.ports.all() {
		if p.str("device_id") != s.str("id") {
			continue
		}
		netName := p.str("network_id")
		if n, ok := c.networks.get(netName); ok {
			netName = n.str("name")
		}
		list, _ := addresses[netName].([]any)
		ips, _ := p["fixed_ips"].([]any)
		for _, ip := range ips {
			m, _ := ip.(map[string]any)
			list = append(list, map[string]any{"version": 4, "addr": m["ip_address"], "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": p.str("mac_address")})
		}
		for _, f := range c.floatingIPs.all() {
			if f.str("port_id") == p.str("id") {
				list = append(list, map[string]any{"version": 4, "addr": f.str("floating_ip_address"), "OS-EXT-IPS:type": "floating", "OS-EXT-IPS-MAC:mac_addr": p.str("mac_address")})
			}
		}
		addresses[netName] = list
	}
	v["addresses"] = addresses
	return v
}

// listServers is GET /servers and /servers/detail with Nova's filters: name is a regular
// expression searched in the name, the others equal a field or match tags.
func (c *Cloud) listServers(detail bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var nameRE *regexp.Regexp
		if n := q.Get("name"); n != "" {
			var err error
			if nameRE, err = regexp.Compile(n); err != nil {
				novaError(w, http.StatusBadRequest, "Invalid regular expression in name: "+err.Error())
				return
			}
		}
		filters := url2filters(q)
		c.mu.Lock()
		defer c.mu.Unlock()
		out := []any{}
		for _, s := range c.servers.all() {
			if nameRE != nil && !nameRE.MatchString(s.str("name")) {
				continue
			}
			if !matches(s, filters) {
				continue
			}
			if detail {
				out = append(out, c.serverView(s))
			} else {
				out = append(out, map[string]any{"id": s.str("id"), "name": s.str("name"), "links": s["links"]})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"servers": out})
	}
}

// url2filters keeps the server list filters that compare a field; the ones Nova reads otherwise
// (name, paging, tenancy, time) are dropped.
func url2filters(q map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range q {
		switch k {
		case "name", "all_tenants", "changes-since", "changes-before", "deleted", "project_id", "tenant_id", "limit", "marker", "sort_key", "sort_dir":
		case "flavor":
			out["flavor_id"] = v
		default:
			out[k] = v
		}
	}
	return out
}

// deleteServer is Nova's DELETE: the server shows task_state deleting until its machine is gone,
// then disappears; its ports are unbound, and those Nova made for it are deleted.
func (c *Cloud) deleteServer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c.mu.Lock()
	s, ok := c.servers.get(id)
	b, isBooting := c.booting[id]
	closed := c.closed
	if ok && !closed {
		s["OS-EXT-STS:task_state"] = "deleting"
		if isBooting {
			b.cancel()
		}
		c.booted.Add(1)
	}
	c.mu.Unlock()
	if !ok {
		novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", id))
		return
	}
	if closed {
		novaError(w, http.StatusServiceUnavailable, "The cloud is shutting down.")
		return
	}
	go func() {
		defer c.booted.Done()
		if isBooting {
			// A boot stopped half-way may still be starting the machine: it is deleted after.
			<-b.done
		}
		if c.cfg.Machines != nil {
			if err := c.cfg.Machines.Delete(c.ctx, id); err != nil {
				c.log.Error("delete a server's machine", "server", id, "err", err)
				c.mu.Lock()
				if s, ok := c.servers.get(id); ok {
					s["OS-EXT-STS:task_state"] = nil
				}
				c.mu.Unlock()
				c.setState(id, "ERROR", "", "error", 0, "Failed to delete the instance: "+err.Error())
				return
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.ports.all() {
			if p.str("device_id") != id {
				continue
			}
			if created, _ := p["nova_created"].(bool); created {
				c.removePort(p)
				continue
			}
			p["device_id"], p["device_owner"], p["status"], p["binding:host_id"], p["binding:vif_type"] = "", "", "DOWN", "", "unbound"
		}
		c.servers.remove(id)
	}()
	w.WriteHeader(http.StatusNoContent)
}

func (c *Cloud) serverAction(w http.ResponseWriter, r *http.Request) {
	var body map[string]map[string]any
	if !decode(w, r, &body, func(w http.ResponseWriter, s int, m string) { novaError(w, s, m) }) {
		return
	}
	id := r.PathValue("id")
	c.mu.Lock()
	_, ok := c.servers.get(id)
	c.mu.Unlock()
	if !ok {
		novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", id))
		return
	}
	if opts, ok := body["os-getConsoleOutput"]; ok {
		out := ""
		if c.cfg.Machines != nil {
			out = c.cfg.Machines.Console(id)
		}
		if n, ok := opts["length"].(float64); ok && n > 0 {
			lines := strings.SplitAfter(out, "\n")
			if len(lines) > int(n) {
				out = strings.Join(lines[len(lines)-int(n):], "")
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"output": out})
		return
	}
	for k := range body {
		if slices.Contains([]string{"os-start", "os-stop", "reboot"}, k) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		novaError(w, http.StatusBadRequest, "There is no such action: "+k)
		return
	}
	novaError(w, http.StatusBadRequest, "Malformed request body")
}

func (c *Cloud) serverTags(f func(o object) int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		s, ok := c.servers.get(r.PathValue("id"))
		var tags []string
		if ok {
			f(s)
			tags = s.strings("tags")
		}
		c.mu.Unlock()
		if !ok {
			novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"tags": append([]string{}, tags...)})
	}
}

// setServerState is the server-state fault: a running server (by name or ID) goes to SHUTOFF, as
// when its guest powers off, or to ERROR with a fault, as when its host fails; either way its
// machine stops, abruptly, and nothing of the cloud starts it again.
func (c *Cloud) setServerState(nameOrID, status, message string) error {
	c.mu.Lock()
	var found object
	for _, s := range c.servers.all() {
		if s.str("id") == nameOrID || s.str("name") == nameOrID {
			found = s
		}
	}
	if found == nil {
		c.mu.Unlock()
		return fmt.Errorf("fault server-state: no server named %q", nameOrID)
	}
	id := found.str("id")
	if st := found.str("status"); st != "ACTIVE" {
		c.mu.Unlock()
		return fmt.Errorf("fault server-state: server %s is %s, expected ACTIVE", nameOrID, st)
	}
	before := found.clone()
	switch status {
	case "SHUTOFF":
		setServer(found, "SHUTOFF", "stopped", 4, "")
	case "ERROR":
		if message == "" {
			message = "The instance's host went down: its hypervisor stopped answering."
		}
		setServer(found, "ERROR", "error", 0, message)
	default:
		c.mu.Unlock()
		return fmt.Errorf("fault server-state: status %q, expected SHUTOFF or ERROR", status)
	}
	c.mu.Unlock()
	c.log.Info("fault injected", "kind", "server-state", "server", nameOrID, "status", status)
	if c.cfg.Machines != nil {
		if err := c.cfg.Machines.Stop(c.ctx, id); err != nil {
			// Its machine still runs: the record says so again.
			c.mu.Lock()
			if _, ok := c.servers.get(id); ok {
				c.servers.put(before)
			}
			c.mu.Unlock()
			return fmt.Errorf("fault server-state: stop server %s: %w", nameOrID, err)
		}
	}
	return nil
}

// setServer sets a server's state fields, as Nova shows them.
func setServer(s object, status, vm string, power int, fault string) {
	s["status"], s["OS-EXT-STS:vm_state"], s["OS-EXT-STS:power_state"], s["OS-EXT-STS:task_state"] = status, vm, power, nil
	if fault != "" {
		s["fault"] = map[string]any{"code": 500, "message": fault, "created": stamp()}
	}
	touch(s)
}
