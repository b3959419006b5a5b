// Package cloudfault asks a machine's cloud why it failed the machine, when the infrastructure
// provider did not record it: CAPO marks a server that Nova left in ERROR as failed with
// "instance state ERROR is unexpected", and only Nova's fault on the server says why (a quota, a
// network, an image). It reads the provider's own objects and credentials (openstackapi), as the
// provider does, and asks with the same client library (gophercloud).
package cloudfault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/openstackapi"
)

// ErrNotKnown is returned for an infrastructure kind whose cloud this package cannot ask.
var ErrNotKnown = errors.New("no way to ask this kind's cloud")

// askTimeout bounds one question to a cloud: the answer is an explanation, not a step, and a
// cloud that does not answer must not hold up the conclusion.
const askTimeout = 20 * time.Second

// Fault is what a cloud says about a failed machine.
type Fault struct {
	// Server names the cloud's object (OpenStack: the server's ID).
	Server string
	// State says what the server is: "is ERROR", "not created (InstanceCreateFailed)".
	State string
	// Message is the cloud's fault message; Code its HTTP-like code (Nova: 500 for a build that
	// failed, 400 for a bad request), 0 when none.
	Message string
	Code    int
}

func (f Fault) String() string {
	s := fmt.Sprintf("server %s %s", f.Server, f.State)
	if f.Message != "" {
		s += ", the cloud's fault: " + f.Message
		if f.Code != 0 {
			s += fmt.Sprintf(" (code %d)", f.Code)
		}
	}
	return s
}

var openStackMachine = schema.GroupKind{Group: machines.OpenStackServer.Group, Kind: "OpenStackMachine"}

// Ask asks the cloud of infraMachine (a provider's infrastructure machine, as read) about its
// server. It returns ErrNotKnown for a kind it cannot ask.
func Ask(ctx context.Context, c client.Reader, infraMachine *unstructured.Unstructured) (Fault, error) {
	if infraMachine.GroupVersionKind().GroupKind() != openStackMachine {
		return Fault{}, ErrNotKnown
	}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	return askOpenStack(ctx, c, infraMachine)
}

// askOpenStack reads the OpenStackServer CAPO made for the machine (same namespace and name), the
// server's ID and the credentials it names, and asks Nova for the server.
func askOpenStack(ctx context.Context, c client.Reader, machine *unstructured.Unstructured) (Fault, error) {
	srv := &unstructured.Unstructured{}
	srv.SetGroupVersionKind(machines.OpenStackServer)
	key := client.ObjectKeyFromObject(machine)
	if err := c.Get(ctx, key, srv); err != nil {
		return Fault{}, fmt.Errorf("read OpenStackServer %s: %w", key, err)
	}
	id, _, _ := unstructured.NestedString(srv.Object, "status", "instanceID")
	if id == "" {
		// The cloud refused to create it (a quota, a flavor): CAPO recorded the refusal, and
		// there is no server to ask about.
		reason, message := machines.InstanceNotReady(srv)
		if message == "" {
			return Fault{}, fmt.Errorf("OpenStackServer %s has no server ID and no reason recorded", key)
		}
		return Fault{Server: key.Name, State: "not created (" + reason + ")", Message: message}, nil
	}
	cloud, err := openstackapi.ForObject(ctx, c, srv)
	if err != nil {
		return Fault{}, err
	}
	compute, err := cloud.Compute()
	if err != nil {
		return Fault{}, fmt.Errorf("the compute API of OpenStackServer %s: %w", key, err)
	}
	server, err := servers.Get(ctx, compute, id).Extract()
	if err != nil {
		return Fault{}, fmt.Errorf("ask the compute API for server %s: %w", id, err)
	}
	return Fault{Server: id, State: "is " + server.Status, Message: server.Fault.Message, Code: server.Fault.Code}, nil
}
