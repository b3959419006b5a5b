package rbacrules_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/rbacrules"
)

const objects = `
- apiVersion: rbac.authorization.k8s.io/v1
  kind: Role
  metadata: {name: tenant, namespace: team-a}
  rules:
    - {apiGroups: [helm.toolkit.fluxcd.io], resources: [helmreleases], verbs: [get, list, watch, create, update, patch, delete]}
    - {apiGroups: [kustomize.toolkit.fluxcd.io], resources: [kustomizations], verbs: [get, list, watch]}
    - {apiGroups: [""], resources: [secrets], resourceNames: [one], verbs: [create, patch]}
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: tenant, namespace: team-a}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: tenant}
  subjects: [{kind: ServiceAccount, name: tenant, namespace: team-a}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: Role
  metadata: {name: tenant, namespace: team-b}
  rules:
    - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: tenant, namespace: team-b}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: tenant}
  subjects: [{kind: ServiceAccount, name: tenant, namespace: team-a}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRole
  metadata: {name: events}
  rules:
    - {apiGroups: [""], resources: [events], verbs: [create, patch]}
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRoleBinding
  metadata: {name: events}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: events}
  subjects: [{kind: ServiceAccount, name: tenant, namespace: team-a}]
`

// An account holds the rules of what is bound to it: a Role of its namespace (not another
// namespace's, even one that names it), a ClusterRole; a rule for named objects only grants
// writing those, which a new object is not.
func TestWhatAnAccountMayWrite(t *testing.T) {
	var list []map[string]any
	if err := yaml.Unmarshal([]byte(objects), &list); err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, o := range list {
		objs = append(objs, &unstructured.Unstructured{Object: o})
	}
	rules := rbacrules.Of(objs, "team-a", "tenant")
	for _, c := range []struct {
		group, resource string
		want            bool
	}{
		{"helm.toolkit.fluxcd.io", "helmreleases", true},
		{"kustomize.toolkit.fluxcd.io", "kustomizations", false},
		{"", "secrets", false},
		{"", "configmaps", false},
		{"", "events", true},
	} {
		if got := rules.Allows(c.group, c.resource, rbacrules.Writes...); got != c.want {
			t.Errorf("%s.%s: %v, want %v", c.resource, c.group, got, c.want)
		}
	}
	if got := rules.Writable(); got != "events, helmreleases.helm.toolkit.fluxcd.io" {
		t.Errorf("writable: %s", got)
	}
	if rbacrules.Of(objs, "team-a", "other").Allows("", "events", "create") {
		t.Error("another account holds the rules")
	}
}
