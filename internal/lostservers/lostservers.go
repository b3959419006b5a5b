// Package lostservers removes, at their OpenStack cloud, the servers of a management cluster
// that a restore replaced, with what CAPO made for each of them alone: its ports, the floating
// IPs on those ports, and its members in the API load balancer's pools. What the lost cluster
// shared with the new one is kept: CAPO names the network, the router, the security groups and
// the load balancer after the cluster, so the new cluster of the same name took them over.
package lostservers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/openstackapi"
	"cluster-init.dev/cluster-init/internal/restore"
)

// providerIDPrefix is how CAPO's provider IDs begin (openstack:///<server ID>, or with a region
// between the slashes).
const providerIDPrefix = "openstack://"

const (
	// pollEvery is how often a deletion is looked at again.
	pollEvery = 2 * time.Second
	// deleteTimeout bounds the wait for the cloud to delete the servers, and for the load
	// balancer to take each change.
	deleteTimeout = 5 * time.Minute
)

// Of returns the server ID of a CAPO provider ID, and whether it is one.
func Of(providerID string) (string, bool) {
	rest, ok := strings.CutPrefix(providerID, providerIDPrefix)
	if !ok {
		return "", false
	}
	id := rest[strings.LastIndex(rest, "/")+1:]
	return id, id != ""
}

// Result is what was found and done at the cloud.
type Result struct {
	// Removed are the servers deleted, as "machine (server ID)".
	Removed []string
	// Gone are the servers the cloud no longer has (deleted before, by hand or a run before).
	Gone []string
	// Kept are servers that were not removed, each with the reason.
	Kept []string
	// Ports, FloatingIPs and Members are what was removed with the servers (IDs; addresses for
	// floating IPs and members).
	Ports, FloatingIPs, Members []string
}

// Remove removes the servers of the lost machines (each with an OpenStack provider ID) at the
// cloud of the new cluster of the same name, with its credentials: the new OpenStackCluster's
// identityRef. A server that a machine of the new management cluster has (keep holds their
// provider IDs), or whose name is not its lost machine's, is kept and said so.
func Remove(ctx context.Context, c client.Reader, lost []restore.Machine, keep map[string]bool, log func(string, ...any)) (Result, error) {
	var out Result
	kept := map[string]bool{}
	for providerID := range keep {
		if id, ok := Of(providerID); ok {
			kept[id] = true
		}
	}
	byCluster := map[client.ObjectKey][]restore.Machine{}
	for _, m := range lost {
		if id, _ := Of(m.ProviderID); kept[id] {
			out.Kept = append(out.Kept, fmt.Sprintf("%s (%s): a machine of the new management cluster has it", m.Name, m.ProviderID))
			continue
		}
		if _, ok := Of(m.ProviderID); ok {
			key := client.ObjectKey{Namespace: m.Namespace, Name: m.Cluster}
			byCluster[key] = append(byCluster[key], m)
		}
	}
	keys := make([]client.ObjectKey, 0, len(byCluster))
	for k := range byCluster {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, key := range keys {
		cl, err := newCloudOf(ctx, c, key)
		if err != nil {
			return out, err
		}
		if err := cl.remove(ctx, byCluster[key], &out, log); err != nil {
			return out, fmt.Errorf("remove the lost servers of cluster %s: %w", key, err)
		}
	}
	return out, nil
}

// cloudOf is the cloud of one cluster, as its new OpenStackCluster describes it.
type cloudOf struct {
	cluster              client.ObjectKey
	compute, network, lb *gophercloud.ServiceClient
	// loadBalancer is the API load balancer's ID ("" in the floating-IP mode); endpoint the API
	// address of the new cluster, whose floating IP stays whatever port it was on; network the
	// cluster's network, the only one a detached port of a lost machine is looked for on ("":
	// any).
	loadBalancer, endpoint, networkID string
}

func newCloudOf(ctx context.Context, c client.Reader, key client.ObjectKey) (*cloudOf, error) {
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, key, cl); err != nil {
		return nil, fmt.Errorf("read cluster %s of the new management cluster, whose cloud the lost servers are on: %w", key, err)
	}
	infra, err := external.GetObjectFromContractVersionedRef(ctx, c, cl.Spec.InfrastructureRef, key.Namespace)
	if err != nil {
		return nil, fmt.Errorf("read the infrastructure of cluster %s: %w", key, err)
	}
	if infra.GetKind() != "OpenStackCluster" {
		return nil, fmt.Errorf("cluster %s is on %s, not OpenStack: its lost servers cannot be reached with its credentials", key, infra.GetKind())
	}
	session, err := openstackapi.ForObject(ctx, c, infra)
	if err != nil {
		return nil, err
	}
	out := &cloudOf{cluster: key}
	if out.compute, err = session.Compute(); err != nil {
		return nil, fmt.Errorf("the compute API of cluster %s: %w", key, err)
	}
	if out.network, err = session.Network(); err != nil {
		return nil, fmt.Errorf("the network API of cluster %s: %w", key, err)
	}
	out.loadBalancer, _, _ = unstructured.NestedString(infra.Object, "status", "apiServerLoadBalancer", "id")
	if out.loadBalancer != "" {
		if out.lb, err = session.LoadBalancer(); err != nil {
			return nil, fmt.Errorf("the load-balancer API of cluster %s: %w", key, err)
		}
	}
	out.endpoint = cl.Spec.ControlPlaneEndpoint.Host
	out.networkID, _, _ = unstructured.NestedString(infra.Object, "status", "network", "id")
	return out, nil
}

// lostServer is a lost machine's server as the cloud has it, with what was made for it alone.
type lostServer struct {
	machine restore.Machine
	id      string
	ports   []ports.Port
}

func (s lostServer) String() string { return fmt.Sprintf("%s (server %s)", s.machine.Name, s.id) }

func (cl *cloudOf) remove(ctx context.Context, lost []restore.Machine, out *Result, log func(string, ...any)) error {
	servers, err := cl.find(ctx, lost, out, log)
	if err != nil || len(servers) == 0 {
		return err
	}
	// The lost machines by their ports' addresses: how their members are found.
	addresses := map[string]string{}
	var portIDs []string
	for _, s := range servers {
		for _, p := range s.ports {
			portIDs = append(portIDs, p.ID)
			for _, ip := range p.FixedIPs {
				addresses[ip.IPAddress] = s.machine.Name
			}
		}
	}
	if err := cl.removeMembers(ctx, addresses, out, log); err != nil {
		return err
	}
	if err := cl.deleteServers(ctx, servers, out, log); err != nil {
		return err
	}
	if err := cl.removeFloatingIPs(ctx, portIDs, out, log); err != nil {
		return err
	}
	for _, s := range servers {
		for _, p := range s.ports {
			if err := ports.Delete(ctx, cl.network, p.ID).ExtractErr(); err != nil && !isNotFound(err) {
				return fmt.Errorf("delete port %s of %s: %w", p.ID, s, err)
			}
			out.Ports = append(out.Ports, p.ID)
			log("deleted port %s (%s) of %s", p.ID, p.Name, s)
		}
	}
	return nil
}

// find reads each lost server and its ports: those the server has, and those CAPO made for it
// (named after the machine) that a run before left when it had deleted the server.
func (cl *cloudOf) find(ctx context.Context, lost []restore.Machine, out *Result, log func(string, ...any)) ([]lostServer, error) {
	page, err := ports.List(cl.network, ports.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the ports of the cloud of %s: %w", cl.cluster, err)
	}
	all, err := ports.ExtractPorts(page)
	if err != nil {
		return nil, fmt.Errorf("read the ports of the cloud of %s: %w", cl.cluster, err)
	}
	var found []lostServer
	for _, m := range lost {
		id, _ := Of(m.ProviderID)
		s := lostServer{machine: m, id: id}
		srv, err := servers.Get(ctx, cl.compute, id).Extract()
		switch {
		case isNotFound(err) || err == nil && gone(srv.Status):
			out.Gone = append(out.Gone, s.String())
			log("%s: the cloud no longer has it (or not in the project these credentials see)", s)
		case err != nil:
			return nil, fmt.Errorf("read server %s of lost machine %s: %w", id, m.Name, err)
		case srv.Name != m.Name:
			out.Kept = append(out.Kept, fmt.Sprintf("%s: the server is named %q, not after the machine", s, srv.Name))
			log("keeping %s: the server is named %q, not after the lost machine", s, srv.Name)
			continue
		}
		for _, p := range all {
			detached := p.DeviceID == "" && strings.HasPrefix(p.Name, m.Name+"-") && (cl.networkID == "" || p.NetworkID == cl.networkID)
			if p.DeviceID == id || detached {
				s.ports = append(s.ports, p)
			}
		}
		if err == nil && !gone(srv.Status) || len(s.ports) > 0 {
			found = append(found, s)
		}
	}
	return found, nil
}

// removeMembers removes the members of the API load balancer's pools that CAPO made for the
// lost machines: at one of a lost server's addresses, and named as CAPO names a machine's member
// (<pool>-<machine>). The new cluster's CAPO adopted the load balancer and adds its own
// machines, and only knows the lost ones' members by names it will not make again.
func (cl *cloudOf) removeMembers(ctx context.Context, addresses map[string]string, out *Result, log func(string, ...any)) error {
	if cl.loadBalancer == "" || len(addresses) == 0 {
		return nil
	}
	// Every pool, the load balancer's picked here: a pool names its load balancers in a list,
	// which not every Octavia filters on.
	page, err := pools.List(cl.lb, pools.ListOpts{}).AllPages(ctx)
	if err != nil {
		return fmt.Errorf("list the pools of load balancer %s: %w", cl.loadBalancer, err)
	}
	all, err := pools.ExtractPools(page)
	if err != nil {
		return fmt.Errorf("read the pools of load balancer %s: %w", cl.loadBalancer, err)
	}
	for _, pool := range all {
		if !slices.ContainsFunc(pool.Loadbalancers, func(r pools.LoadBalancerID) bool { return r.ID == cl.loadBalancer }) {
			continue
		}
		page, err := pools.ListMembers(cl.lb, pool.ID, pools.ListMembersOpts{}).AllPages(ctx)
		if err != nil {
			return fmt.Errorf("list the members of pool %s: %w", pool.ID, err)
		}
		members, err := pools.ExtractMembers(page)
		if err != nil {
			return fmt.Errorf("read the members of pool %s: %w", pool.ID, err)
		}
		for _, m := range members {
			machine, ok := addresses[m.Address]
			if !ok || m.Name != pool.Name+"-"+machine {
				continue
			}
			if err := cl.deleteMember(ctx, pool.ID, m); err != nil {
				return err
			}
			out.Members = append(out.Members, fmt.Sprintf("%s:%d", m.Address, m.ProtocolPort))
			log("removed member %s:%d of pool %s of load balancer %s", m.Address, m.ProtocolPort, pool.Name, cl.loadBalancer)
		}
	}
	return cl.loadBalancerActive(ctx)
}

// deleteMember deletes a member once the load balancer takes changes. Octavia refuses one (409)
// while it applies another, which the new cluster's CAPO may be making meanwhile: asked again.
func (cl *cloudOf) deleteMember(ctx context.Context, poolID string, m pools.Member) error {
	start := time.Now()
	for {
		if err := cl.loadBalancerActive(ctx); err != nil {
			return err
		}
		err := pools.DeleteMember(ctx, cl.lb, poolID, m.ID).ExtractErr()
		switch {
		case err == nil || isNotFound(err):
			return nil
		case !gophercloud.ResponseCodeIs(err, http.StatusConflict):
			return fmt.Errorf("delete member %s (%s) of pool %s: %w", m.ID, m.Address, poolID, err)
		case time.Since(start) > deleteTimeout:
			return fmt.Errorf("delete member %s (%s) of pool %s: refused as the load balancer changes, for %s: %w", m.ID, m.Address, poolID, time.Since(start).Round(time.Second), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete member %s (%s) of pool %s: %w", m.ID, m.Address, poolID, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

func (cl *cloudOf) loadBalancerActive(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollEvery, deleteTimeout, true, func(ctx context.Context) (bool, error) {
		lb, err := loadbalancers.Get(ctx, cl.lb, cl.loadBalancer).Extract()
		if err != nil {
			return false, fmt.Errorf("read load balancer %s: %w", cl.loadBalancer, err)
		}
		last = lb.ProvisioningStatus
		switch last {
		case "ACTIVE":
			return true, nil
		case "ERROR":
			return false, fmt.Errorf("load balancer %s is in ERROR", cl.loadBalancer)
		}
		return false, nil
	})
	if err != nil && wait.Interrupted(err) {
		return fmt.Errorf("load balancer %s still %s after %s", cl.loadBalancer, last, deleteTimeout)
	}
	return err
}

// deleteServers asks for every deletion first, then waits for all: Nova deletes in the
// background.
func (cl *cloudOf) deleteServers(ctx context.Context, lost []lostServer, out *Result, log func(string, ...any)) error {
	pending := map[string]lostServer{}
	for _, s := range lost {
		if slices.Contains(out.Gone, s.String()) {
			continue
		}
		if err := servers.Delete(ctx, cl.compute, s.id).ExtractErr(); err != nil && !isNotFound(err) {
			return fmt.Errorf("delete %s: %w", s, err)
		}
		pending[s.id] = s
		log("deleting %s", s)
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, pollEvery, deleteTimeout, true, func(ctx context.Context) (bool, error) {
		for id, s := range pending {
			srv, err := servers.Get(ctx, cl.compute, id).Extract()
			switch {
			case isNotFound(err) || err == nil && gone(srv.Status):
				delete(pending, id)
				out.Removed = append(out.Removed, s.String())
				log("deleted %s after %s", s, time.Since(start).Round(time.Second))
			case err != nil:
				return false, fmt.Errorf("read %s, being deleted: %w", s, err)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil && wait.Interrupted(err) {
		var left []string
		for _, s := range pending {
			left = append(left, s.String())
		}
		sort.Strings(left)
		return fmt.Errorf("the cloud has not deleted %s after %s", strings.Join(left, ", "), time.Since(start).Round(time.Second))
	}
	sort.Strings(out.Removed)
	return err
}

// removeFloatingIPs deletes the floating IPs that were on the lost servers' ports, except the
// new cluster's API address.
func (cl *cloudOf) removeFloatingIPs(ctx context.Context, portIDs []string, out *Result, log func(string, ...any)) error {
	for _, portID := range portIDs {
		page, err := floatingips.List(cl.network, floatingips.ListOpts{PortID: portID}).AllPages(ctx)
		if err != nil {
			return fmt.Errorf("list the floating IPs of port %s: %w", portID, err)
		}
		fips, err := floatingips.ExtractFloatingIPs(page)
		if err != nil {
			return fmt.Errorf("read the floating IPs of port %s: %w", portID, err)
		}
		for _, f := range fips {
			if f.FloatingIP == cl.endpoint {
				log("keeping floating IP %s: the new cluster's API address (on a lost server's port, so unassociated with it: CAPO associates it again when it reconciles a control-plane machine)", f.FloatingIP)
				continue
			}
			if err := floatingips.Delete(ctx, cl.network, f.ID).ExtractErr(); err != nil && !isNotFound(err) {
				return fmt.Errorf("delete floating IP %s: %w", f.FloatingIP, err)
			}
			out.FloatingIPs = append(out.FloatingIPs, f.FloatingIP)
			log("deleted floating IP %s of port %s", f.FloatingIP, portID)
		}
	}
	return nil
}

// gone says whether a server's status is one Nova shows only of a deleted server: soft-deleted
// (reclaimed later, its ports kept until then) or deleted.
func gone(status string) bool { return status == "SOFT_DELETED" || status == "DELETED" }

func isNotFound(err error) bool {
	return err != nil && gophercloud.ResponseCodeIs(err, http.StatusNotFound)
}
