// Package rbacrules reads, from the RBAC objects of a render, what an account may do: the rules
// of the Roles and ClusterRoles bound to it. Offline checks ask it what the API server would
// allow the account that applies a directory (a tenant's, the applications'), so that what it
// refuses is named before a commit makes a Kustomization fail as a whole.
package rbacrules

import (
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Rules are the rules an account holds.
type Rules []rbacv1.PolicyRule

// Of finds the rules of the ServiceAccount namespace/name among objs: those of the Roles of its
// namespace and the ClusterRoles that a RoleBinding of its namespace or a ClusterRoleBinding binds
// to it.
func Of(objs []*unstructured.Unstructured, namespace, name string) Rules {
	roles := map[string][]rbacv1.PolicyRule{}
	var bindings []struct {
		ref  rbacv1.RoleRef
		from string // the binding's namespace, "" for a ClusterRoleBinding
		subs []rbacv1.Subject
	}
	for _, o := range objs {
		if o.GroupVersionKind().Group != rbacv1.GroupName {
			continue
		}
		switch o.GetKind() {
		case "Role", "ClusterRole":
			var r struct {
				Rules []rbacv1.PolicyRule `json:"rules"`
			}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r) == nil {
				roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = r.Rules
			}
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b) == nil {
				bindings = append(bindings, struct {
					ref  rbacv1.RoleRef
					from string
					subs []rbacv1.Subject
				}{b.RoleRef, o.GetNamespace(), b.Subjects})
			}
		}
	}
	var out Rules
	for _, b := range bindings {
		if b.from != "" && b.from != namespace {
			continue
		}
		if !slices.ContainsFunc(b.subs, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == name && (s.Namespace == namespace || s.Namespace == "" && b.from == namespace)
		}) {
			continue
		}
		key := "ClusterRole//" + b.ref.Name
		if b.ref.Kind == "Role" {
			key = "Role/" + b.from + "/" + b.ref.Name
		}
		out = append(out, roles[key]...)
	}
	return out
}

// Allows tells whether the rules grant every verb on group/resource (any object of it).
func (rs Rules) Allows(group, resource string, verbs ...string) bool {
	for _, verb := range verbs {
		if !slices.ContainsFunc(rs, func(r rbacv1.PolicyRule) bool {
			return len(r.ResourceNames) == 0 && has(r.APIGroups, group) && has(r.Resources, resource) && has(r.Verbs, verb)
		}) {
			return false
		}
	}
	return true
}

func has(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }

// Writes are the verbs kustomize-controller's server-side apply needs: a patch, which creates an
// object that does not exist yet.
var Writes = []string{"create", "patch"}

// Writable lists what the rules let the account write (resource.group), for messages.
func (rs Rules) Writable() string {
	seen := map[string]bool{}
	for _, r := range rs {
		if len(r.ResourceNames) > 0 || !has(r.Verbs, "create") || !has(r.Verbs, "patch") {
			continue
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				name := res
				if g != "" {
					name += "." + g
				}
				seen[name] = true
			}
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}
