package workloads_test

import (
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/workloads"
)

// teamOSPassword is the password of team-os's own project of the cloud: it must be nowhere but in
// the Secret its clusters are built with.
const teamOSPassword = "team-os-Pa55-w0rd-of-its-project"

// capoTenants are the platform's values of the tenants of a management cluster on OpenStack: the
// default tenant, whose clusters are built with the platform's credentials, and team-os, with a
// project of its own (its credentials, its cloud's name and network). The management cluster has
// a floating IP of its own, which no tenant's cluster may take.
var capoTenants = map[string]any{
	"cluster": map[string]any{"name": "wl-management", "capo": map[string]any{"control_plane_endpoint_floating_ip": "203.0.113.10"}},
	"workload_clusters": map[string]any{"tenants": map[string]any{
		"workload-clusters": map[string]any{"name_prefix": "wl", "path": "./clusters/management/workload-clusters", "readers_group": readersA},
		"team-os": map[string]any{"name_prefix": "os-", "path": "./clusters/management/team-os",
			"capo": map[string]any{"cloud_name": "team-os", "node_cidr": "10.7.0.0/24", "external_network_id": "11111111-2222-3333-4444-555555555555",
				"api_server_load_balancer": map[string]any{"enabled": false}}},
	}},
	"credentials": map[string]any{"tenants": map[string]any{"team-os": map[string]any{"openstack": map[string]any{"clouds_yaml": `clouds:
  team-os:
    auth:
      auth_url: https://keystone.example.invalid:5000/v3
      username: team-os
      password: ` + teamOSPassword + `
      project_name: team-os
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    auth_type: password
`}}}},
}

const (
	builderOS = "system:serviceaccount:team-os:cluster-builder"
	tenantOS  = "system:serviceaccount:team-os:tenant"
)

// renderCAPOTenantTestbed is the tenants of kubeadm-capo, and wl1 written by the default tenant.
func renderCAPOTenantTestbed(t *testing.T) *tenantTestbed {
	t.Helper()
	return renderTenantTestbedOf(t, "kubeadm-capo", capoTenants, wl1WithoutProviders(t, "wl1"))
}

// A tenant's clusters on OpenStack are built with credentials the platform keeps in the tenant's
// namespace (the tenant's own project's, or the platform's), and the cloud's settings the
// platform gives them; the credentials are in that Secret and nowhere else, and no tenant's
// cluster gets the management cluster's floating IP.
func TestATenantsClustersOnOpenStackAreBuiltWithThePlatformsCredentials(t *testing.T) {
	tb := renderCAPOTenantTestbed(t)
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range tb.installed {
		byName[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	for ns, want := range map[string]string{"workload-clusters": "application_credential_id: FILL-IN", "team-os": teamOSPassword} {
		sec := byName["Secret/"+ns+"/"+names.TenantCloudCredentialsSecret]
		if sec == nil {
			t.Fatalf("no credentials Secret in %s", ns)
		}
		var s corev1.Secret
		if err := runtimeFrom(sec, &s); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(s.Data["clouds.yaml"]), want) || sec.GetLabels()["cluster-init.dev/platform"] != "true" {
			t.Errorf("%s's credentials: %q, labels %v", ns, s.Data["clouds.yaml"], sec.GetLabels())
		}
		// One cloud, as given.
		var clouds struct {
			Clouds map[string]any `json:"clouds"`
		}
		if err := yaml.Unmarshal(s.Data["clouds.yaml"], &clouds); err != nil || len(clouds.Clouds) != 1 {
			t.Errorf("%s's clouds.yaml: %d clouds, %v", ns, len(clouds.Clouds), err)
		}
		var platform struct {
			Cluster map[string]any `json:"cluster"`
		}
		cm := byName["ConfigMap/"+ns+"/"+names.TenantPlatformConfigMap]
		data, _, _ := unstructured.NestedString(cm.Object, "data", "values.yaml")
		if err := yaml.Unmarshal([]byte(data), &platform); err != nil {
			t.Fatal(err)
		}
		capo, _ := platform.Cluster["capo"].(map[string]any)
		if capo["credentials_secret"] != names.TenantCloudCredentialsSecret || capo["control_plane_endpoint_floating_ip"] != nil || capo["image_name"] != "ubuntu-2404-kube-v1.37.0" {
			t.Errorf("%s's clusters' cloud settings: %v", ns, capo)
		}
		if ns == "team-os" && (capo["cloud_name"] != "team-os" || capo["node_cidr"] != "10.7.0.0/24") {
			t.Errorf("team-os's own cloud settings: %v", capo)
		}
		// Its own load balancer choice, and the platform's for the others: one tenant's never
		// becomes the platform's.
		if lb, _ := capo["api_server_load_balancer"].(map[string]any); lb["enabled"] != (ns != "team-os") {
			t.Errorf("%s's clusters' API load balancer: %v, want %v", ns, lb, ns != "team-os")
		}
	}
	// The password of team-os's project is in its Secret only (and the release's own credentials).
	for _, o := range tb.installed {
		if o.GetKind() == "Secret" {
			continue
		}
		if y, _ := yaml.Marshal(o.Object); strings.Contains(string(y), teamOSPassword) {
			t.Errorf("%s %s/%s carries team-os's password", o.GetKind(), o.GetNamespace(), o.GetName())
		}
	}
	// wl1's definitions name the platform's Secret, and make none.
	var cluster *unstructured.Unstructured
	for _, d := range tb.definitions {
		switch d.GetKind() {
		case "OpenStackCluster":
			cluster = d
		case "Secret":
			t.Errorf("wl1's definitions make Secret %s", d.GetName())
		}
	}
	if cluster == nil {
		t.Fatalf("wl1's definitions: no OpenStackCluster among %d objects", len(tb.definitions))
	}
	if ref, _, _ := unstructured.NestedStringMap(cluster.Object, "spec", "identityRef"); ref["name"] != names.TenantCloudCredentialsSecret || ref["cloudName"] != "openstack" {
		t.Errorf("wl1's identityRef: %v", ref)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(cluster.Object, "spec", "apiServerFloatingIP"); found {
		t.Error("wl1 takes a floating IP of the platform's values")
	}
}

func runtimeFrom(u *unstructured.Unstructured, into any) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return yaml.Unmarshal(data, into)
}

// capoAdmissionCases are attacks by the builder of a tenant's clusters on OpenStack: each must be
// refused by the API server, naming what it changed.
func capoAdmissionCases() []admissionCase {
	ok := ""
	return []admissionCase{
		{name: "wl1's definitions as its chart renders them", user: builderA, definition: "OpenStackCluster", refused: ok},
		{name: "wl1's machine templates as its chart renders them", user: builderA, definition: "OpenStackMachineTemplate", refused: ok},
		{name: "a tenant's values naming a Secret of credentials", user: tenantA, edit: set("spec.values.cluster.capo.credentials_secret", "wl1-kubeconfig"), refused: "spec.values.cluster.capo"},
		{name: "one control plane machine where the platform gives no load balancer", user: tenantOS, ns: "team-os", edit: rename("os-one"), refused: ok},
		{name: "three control plane machines where the platform gives no load balancer", user: tenantOS, ns: "team-os",
			edit: all(rename("os-one"), set("spec.values.cluster.control_plane", map[string]any{"replicas": int64(3)})), refused: "spec.values.cluster.control_plane.replicas: expected 1: the platform gives this tenant's clusters on OpenStack no API load balancer (workload_clusters.tenants.team-os.capo.api_server_load_balancer)"},
		{name: "three control plane machines behind the load balancer the platform gives", user: tenantA,
			edit: set("spec.values.cluster.control_plane", map[string]any{"replicas": int64(3)}), refused: ok},
		{name: "a tenant's values taking the management cluster's floating IP", user: tenantA, edit: set("spec.values.cluster.capo.control_plane_endpoint_floating_ip", "203.0.113.10"), refused: "spec.values.cluster.capo"},

		{name: "a cluster built with other credentials", user: builderA, definition: "OpenStackCluster", edit: set("spec.identityRef.name", "wl1-credentials"), refused: "spec.identityRef"},
		{name: "a cluster built with another cloud of the clouds.yaml", user: builderA, definition: "OpenStackCluster", edit: set("spec.identityRef.cloudName", "admin"), refused: "spec.identityRef"},
		{name: "a cluster built in another region", user: builderA, definition: "OpenStackCluster", edit: set("spec.identityRef.region", "RegionTwo"), refused: "spec.identityRef"},
		{name: "a cluster on another external network", user: builderA, definition: "OpenStackCluster", edit: set("spec.externalNetwork.id", "22222222-0000-0000-0000-000000000000"), refused: "spec.externalNetwork"},
		{name: "a cluster with a subnet of its choosing", user: builderA, definition: "OpenStackCluster", edit: set("spec.managedSubnets", []any{map[string]any{"cidr": "10.6.0.0/16"}}), refused: "managedSubnets"},
		{name: "a cluster's security groups open to the world", user: builderA, definition: "OpenStackCluster", edit: set("spec.managedSecurityGroups.allNodesSecurityGroupRules", []any{map[string]any{
			"name": "ssh", "direction": "ingress", "etherType": "IPv4", "protocol": "tcp", "portRangeMin": int64(22), "portRangeMax": int64(22), "remoteIPPrefix": "0.0.0.0/0"}}), refused: "managedSecurityGroups"},
		{name: "a cluster on the management cluster's network", user: builderA, definition: "OpenStackCluster", edit: set("spec.network", map[string]any{"filter": map[string]any{"name": "k8s-clusterapi-cluster-cluster-init-wl-management"}}), refused: "spec.network"},
		{name: "a cluster taking the management cluster's floating IP", user: builderA, definition: "OpenStackCluster", edit: set("spec.apiServerFloatingIP", "203.0.113.10"), refused: "spec.apiServerFloatingIP"},
		{name: "a cluster pointing at the management cluster's API server", user: builderA, definition: "OpenStackCluster", edit: set("spec.controlPlaneEndpoint", map[string]any{"host": "203.0.113.10", "port": int64(6443)}), refused: "spec.controlPlaneEndpoint"},
		{name: "a cluster without the load balancer the platform gives it (its API on one machine)", user: builderA, definition: "OpenStackCluster", edit: set("spec.apiServerLoadBalancer", map[string]any{"enabled": false}), refused: "spec.apiServerLoadBalancer.enabled: expected true"},
		{name: "a cluster behind a load balancer of another network", user: builderA, definition: "OpenStackCluster", edit: set("spec.apiServerLoadBalancer", map[string]any{"enabled": true, "network": map[string]any{"filter": map[string]any{"name": "k8s-clusterapi-cluster-cluster-init-wl-management"}}}), refused: "spec.apiServerLoadBalancer.network"},
		{name: "a cluster with a bastion", user: builderA, definition: "OpenStackCluster", edit: set("spec.bastion", map[string]any{"enabled": true}), refused: "spec.bastion"},
		{name: "an OpenStackCluster named like the management cluster", user: builderA, definition: "OpenStackCluster", edit: set("metadata.name", "wl-management"), refused: "not a name of the tenant's"},

		{name: "machines with a port on another network", user: builderA, definition: "OpenStackMachineTemplate", edit: set("spec.template.spec.ports", []any{map[string]any{"network": map[string]any{"filter": map[string]any{"name": "k8s-clusterapi-cluster-cluster-init-wl-management"}}}}), refused: "spec.template.spec.ports"},
		{name: "machines built with other credentials", user: builderA, definition: "OpenStackMachineTemplate", edit: set("spec.template.spec.identityRef", map[string]any{"name": "wl1-credentials", "cloudName": "openstack"}), refused: "spec.template.spec.identityRef"},
		{name: "machines in the management cluster's server group", user: builderA, definition: "OpenStackMachineTemplate", edit: set("spec.template.spec.serverGroup", map[string]any{"id": "00000000-0000-0000-0000-000000000001"}), refused: "spec.template.spec.serverGroup"},
		{name: "machines of another image", user: builderA, definition: "OpenStackMachineTemplate", edit: set("spec.template.spec.image", map[string]any{"filter": map[string]any{"name": "someone-elses-image"}}), refused: "spec.template.spec.image"},
		{name: "machines with another key pair", user: builderA, definition: "OpenStackMachineTemplate", edit: set("spec.template.spec.sshKeyName", "someone-elses-key"), refused: "sshKeyName"},

		// The bootstrap controllers read a Secret named in a machine's configuration with their
		// own rights, and write it onto the tenant's machines.
		{name: "a control plane file from the cloud's credentials", user: builderA, definition: "KubeadmControlPlane", edit: set("spec.kubeadmConfigSpec.files", []any{map[string]any{
			"path": "/etc/clouds.yaml", "contentFrom": map[string]any{"secret": map[string]any{"name": names.TenantCloudCredentialsSecret, "key": "clouds.yaml"}}}}), refused: "spec.kubeadmConfigSpec.files[].contentFrom: not a field"},
		{name: "a worker's password from the cloud's credentials", user: builderA, definition: "KubeadmConfigTemplate", edit: set("spec.template.spec.users", []any{map[string]any{
			"name": "x", "passwdFrom": map[string]any{"secret": map[string]any{"name": names.TenantCloudCredentialsSecret, "key": "clouds.yaml"}}}}), refused: "spec.template.spec.users: not a field"},
		{name: "an API server environment from the cloud's credentials", user: builderA, definition: "KubeadmControlPlane", edit: set("spec.kubeadmConfigSpec.clusterConfiguration.apiServer.extraEnvs", []any{map[string]any{
			"name": "CLOUDS", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": names.TenantCloudCredentialsSecret, "key": "clouds.yaml"}}}}), refused: "extraEnvs"},
	}
}

// What the builder of a tenant's clusters on OpenStack writes is held to the platform's cloud
// settings and credentials by the API server; the credentials Secret is not the builder's to
// change, and neither the tenant's account nor its people read it.
func TestTheAPIServerHoldsATenantOnOpenStackToThePlatformsCloud(t *testing.T) {
	tb := renderCAPOTenantTestbed(t).start(t)
	tb.admit(t, tb.casesWith(capoAdmissionCases()))
	tb.refusesEveryOtherField(t)
	// team-os's clusters, on its own project and network, are admitted with its settings.
	repo := writeRepository(t, map[string]string{"clusters/management/team-os/os-one/cluster.yaml": wl1WithoutProviders(t, "os-one")})
	p, err := workloads.Read(t.Context(), repo, tb.mgmt, nil)
	if err != nil || len(p.Clusters) != 1 {
		t.Fatalf("team-os's cluster: %v %v", p, err)
	}
	res, err := p.Render(t.Context(), tb.r, p.Clusters[0])
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, o := range res.Objects {
		if o.Release == nil || o.Release.Name != "os-one-cluster" {
			continue
		}
		obj := asApplied(o, "os-one", "team-os")
		if err := tb.create(t, builderOS, obj); err != nil {
			t.Errorf("team-os's %s %s refused: %v", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetKind() == "OpenStackCluster" {
			made++
			if cidr, _, _ := unstructured.NestedSlice(obj.Object, "spec", "managedSubnets"); len(cidr) != 1 || cidr[0].(map[string]any)["cidr"] != "10.7.0.0/24" {
				t.Errorf("os-one's subnet: %v", cidr)
			}
		}
	}
	if made != 1 {
		t.Errorf("os-one's definitions: %d OpenStackClusters", made)
	}
	for ns, builder := range map[string]string{"workload-clusters": builderA, "team-os": builderOS} {
		creds := &corev1.Secret{}
		key := client.ObjectKey{Namespace: ns, Name: names.TenantCloudCredentialsSecret}
		if err := tb.c.Client.Get(t.Context(), key, creds); err != nil {
			t.Fatal(err)
		}
		creds.Data["clouds.yaml"] = []byte("clouds: {}\n")
		if err := tb.as(t, builder).Update(t.Context(), creds.DeepCopy(), client.DryRunAll); err == nil {
			t.Errorf("the builder of %s rewrites the cloud's credentials", ns)
		}
		if err := tb.as(t, builder).Delete(t.Context(), creds.DeepCopy(), client.DryRunAll); err == nil {
			t.Errorf("the builder of %s deletes the cloud's credentials", ns)
		}
		for _, user := range []string{"system:serviceaccount:" + ns + ":tenant", alice} {
			if err := tb.as(t, user).Get(t.Context(), key, &corev1.Secret{}); err == nil {
				t.Errorf("%s reads the cloud's credentials of %s", user, ns)
			}
		}
	}
	// The tenant's account may not even ask for them by name.
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:team-os:tenant",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:team-os"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "team-os", Name: names.TenantCloudCredentialsSecret}}}
	if err := tb.c.Client.Create(t.Context(), review); err != nil || review.Status.Allowed {
		t.Errorf("team-os's account gets its cloud's credentials: %v %v", review.Status.Allowed, err)
	}
}
