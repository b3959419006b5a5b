package validate_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/versions"
)

// Every object of every environment, in every context, is accepted by a real kube-apiserver:
// its CRDs (those the environments render, installed for real) check what the offline schemas
// cannot (CEL rules, defaulting, formats), server-side apply in dry-run mode. No provider runs
// here: conversion webhooks are dropped, and the webhook configurations are only dry-run, so
// the providers' own admission webhooks are not part of this check.
func TestEveryEnvironmentIsAcceptedByAnAPIServer(t *testing.T) {
	root := testenv.Checkout(t)
	pins, err := versions.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	r, err := render.New(root, pins["KUBERNETES_VERSION"], "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := testenv.Start(t, "test")
	ctx := t.Context()

	type rendered struct {
		where string // environment / target
		obj   *unstructured.Unstructured
	}
	var objs []rendered
	crds := map[string]*unstructured.Unstructured{}
	namespaces := map[string]bool{}
	for _, name := range []string{"kubeadm-capd", "rke2-capd", "kubeadm-capo", "rke2-capo"} {
		reports, err := validate.Environment(ctx, r, root, render.Options{Env: testenv.Environment(t, root, name)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, rep := range reports {
			for _, o := range rep.Result.Objects {
				switch o.Object.GetKind() {
				case "CustomResourceDefinition":
					crds[o.Object.GetName()] = o.Object
				case "Namespace":
					namespaces[o.Object.GetName()] = true
				default:
					objs = append(objs, rendered{name + " / " + rep.Target, o.Object})
					if ns := o.Object.GetNamespace(); ns != "" {
						namespaces[ns] = true
					}
				}
			}
		}
	}
	if len(crds) == 0 || len(objs) == 0 {
		t.Fatalf("rendered %d CRDs, %d objects", len(crds), len(objs))
	}
	installCRDs(t, c, crds)
	for ns := range namespaces {
		nsObj := &unstructured.Unstructured{}
		nsObj.SetAPIVersion("v1")
		nsObj.SetKind("Namespace")
		nsObj.SetName(ns)
		if err := c.Client.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}

	var rejected []string
	kinds := map[string]bool{}
	for _, o := range objs {
		obj := o.obj.DeepCopy()
		obj.SetResourceVersion("")
		err := c.Client.Patch(ctx, obj, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner("cluster-init-test"))
		if err != nil {
			rejected = append(rejected, fmt.Sprintf("%s: %s/%s/%s: %v", o.where, obj.GetKind(), obj.GetNamespace(), obj.GetName(), err))
			continue
		}
		kinds[obj.GetKind()] = true
	}
	sort.Strings(rejected)
	if len(rejected) > 0 {
		t.Errorf("%d of %d objects rejected:\n%s", len(rejected), len(objs), strings.Join(rejected, "\n"))
	}
	// The check reached what it is for: the definitions of both providers and their add-ons.
	for _, want := range []string{"Cluster", "KubeadmControlPlane", "RKE2ControlPlane", "DockerCluster", "OpenStackCluster",
		"Kustomization", "HelmRelease", "Deployment", "Certificate"} {
		if !kinds[want] {
			t.Errorf("no %s was dry-run (kinds: %v)", want, sortedKeys(kinds))
		}
	}
	t.Logf("%d objects of %d kinds accepted, %d CRDs installed", len(objs), len(kinds), len(crds))
}

// installCRDs creates the CRDs and waits until they are served. Conversion webhooks go (no
// provider runs here to answer them), and so do cert-manager's CA injection annotations.
func installCRDs(t *testing.T, c *kube.Cluster, crds map[string]*unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	for name, u := range crds {
		crd := u.DeepCopy()
		unstructured.RemoveNestedField(crd.Object, "spec", "conversion")
		annotations := crd.GetAnnotations()
		for k := range annotations {
			if strings.HasPrefix(k, "cert-manager.io/") {
				delete(annotations, k)
			}
		}
		crd.SetAnnotations(annotations)
		if err := c.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("CRD %s: %v", name, err)
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for name := range crds {
		err := wait.PollUntilContextCancel(waitCtx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", name, err)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
