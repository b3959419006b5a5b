// Package openstackapi connects to an OpenStack cloud as Cluster API's provider (CAPO) does: with
// the clouds.yaml (and cacert) of the Secret an identityRef names, with the same client library
// (gophercloud). It is the one place this project reads CAPO's credentials.
package openstackapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cloud is an authenticated session with one region of a cloud.
type Cloud struct {
	provider *gophercloud.ProviderClient
	endpoint gophercloud.EndpointOpts
}

// Compute is the cloud's compute API (Nova).
func (c Cloud) Compute() (*gophercloud.ServiceClient, error) {
	return openstack.NewComputeV2(c.provider, c.endpoint)
}

// Network is the cloud's network API (Neutron).
func (c Cloud) Network() (*gophercloud.ServiceClient, error) {
	return openstack.NewNetworkV2(c.provider, c.endpoint)
}

// LoadBalancer is the cloud's load-balancer API (Octavia).
func (c Cloud) LoadBalancer() (*gophercloud.ServiceClient, error) {
	return openstack.NewLoadBalancerV2(c.provider, c.endpoint)
}

// ForObject connects with the credentials a CAPO object names in spec.identityRef (an
// OpenStackCluster, an OpenStackServer): a Secret of the object's namespace, the cloud in its
// clouds.yaml, the region.
func ForObject(ctx context.Context, c client.Reader, obj *unstructured.Unstructured) (Cloud, error) {
	secretName, _, _ := unstructured.NestedString(obj.Object, "spec", "identityRef", "name")
	cloudName, _, _ := unstructured.NestedString(obj.Object, "spec", "identityRef", "cloudName")
	region, _, _ := unstructured.NestedString(obj.Object, "spec", "identityRef", "region")
	what := fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
	if secretName == "" {
		return Cloud{}, fmt.Errorf("%s names no credentials (spec.identityRef.name)", what)
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: secretName}, secret); err != nil {
		return Cloud{}, fmt.Errorf("read the credentials of %s (Secret %s): %w", what, secretName, err)
	}
	cloud, err := Connect(ctx, secret, cloudName, region)
	if err != nil {
		return Cloud{}, fmt.Errorf("cloud %q of %s (Secret %s): %w", cloudName, what, secretName, err)
	}
	return cloud, nil
}

// Connect authenticates as CAPO does with the Secret's clouds.yaml (and cacert). Nothing of the
// Secret reaches an error: gophercloud's errors name the endpoint and the status, not the
// credentials.
func Connect(ctx context.Context, secret *corev1.Secret, cloudName, region string) (Cloud, error) {
	cloudsYAML, ok := secret.Data["clouds.yaml"]
	if !ok {
		return Cloud{}, errors.New("the Secret has no clouds.yaml")
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
		return Cloud{}, fmt.Errorf("read its clouds.yaml: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if ca := secret.Data["cacert"]; len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return Cloud{}, errors.New("its cacert holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	provider, err := config.NewProviderClient(ctx, auth, config.WithTLSConfig(tlsConfig))
	if err != nil {
		return Cloud{}, fmt.Errorf("authenticate: %w", err)
	}
	return Cloud{provider: provider, endpoint: endpoint}, nil
}
