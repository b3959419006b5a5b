// Package cloudfault asks a machine's cloud why it failed the machine, when the infrastructure
// provider did not record it: CAPO marks a server that Nova left in ERROR as failed with
// "instance state ERROR is unexpected", and only Nova's fault on the server says why (a quota, a
// network, an image). It reads the provider's own objects and credentials, as the provider does,
// and asks with the same client library (gophercloud).
package cloudfault

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/machines"
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
	secretName, _, _ := unstructured.NestedString(srv.Object, "spec", "identityRef", "name")
	cloudName, _, _ := unstructured.NestedString(srv.Object, "spec", "identityRef", "cloudName")
	region, _, _ := unstructured.NestedString(srv.Object, "spec", "identityRef", "region")
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: secretName}, secret); err != nil {
		return Fault{}, fmt.Errorf("read the credentials of OpenStackServer %s (Secret %s): %w", key, secretName, err)
	}
	compute, err := computeClient(ctx, secret, cloudName, region)
	if err != nil {
		return Fault{}, fmt.Errorf("the compute API of cloud %q (Secret %s/%s): %w", cloudName, key.Namespace, secretName, err)
	}
	server, err := servers.Get(ctx, compute, id).Extract()
	if err != nil {
		return Fault{}, fmt.Errorf("ask the compute API for server %s: %w", id, err)
	}
	return Fault{Server: id, State: "is " + server.Status, Message: server.Fault.Message, Code: server.Fault.Code}, nil
}

// computeClient authenticates as CAPO does with the Secret's clouds.yaml (and cacert) and
// returns the compute API of the region. Nothing of the Secret reaches an error: gophercloud's
// errors name the endpoint and the status, not the credentials.
func computeClient(ctx context.Context, secret *corev1.Secret, cloudName, region string) (*gophercloud.ServiceClient, error) {
	cloudsYAML, ok := secret.Data["clouds.yaml"]
	if !ok {
		return nil, errors.New("the Secret has no clouds.yaml")
	}
	// The options name every value that would otherwise come from the environment of this
	// process (OS_REGION_NAME, OS_INTERFACE): the cloud is the one the provider uses.
	auth, endpoint, tlsConfig, err := clouds.Parse(
		clouds.WithCloudsYAML(bytes.NewReader(cloudsYAML)),
		clouds.WithCloudName(cloudName),
		clouds.WithRegion(region),
		clouds.WithEndpointType(""),
	)
	if err != nil {
		return nil, fmt.Errorf("read its clouds.yaml: %w", err)
	}
	if ca := secret.Data["cacert"]; len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("its cacert holds no PEM certificate")
		}
		if tlsConfig == nil {
			tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tlsConfig.RootCAs = pool
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	provider, err := config.NewProviderClient(ctx, auth, config.WithTLSConfig(tlsConfig))
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	return openstack.NewComputeV2(provider, endpoint)
}
