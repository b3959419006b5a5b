//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/placement"
)

const helloManifests = `apiVersion: v1
kind: Namespace
metadata:
  name: hello
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello
  namespace: hello
spec:
  replicas: 1
  selector:
    matchLabels: {app: hello}
  template:
    metadata:
      labels: {app: hello}
    spec:
      containers:
        - name: hello
          image: cluster-init-testbed/hello:v1
          args:
            - --cluster=${CLUSTER_NAME}FAIL_ON
          ports:
            - containerPort: 8080
          readinessProbe:
            httpGet: {path: /healthz, port: 8080}
            periodSeconds: 2
---
apiVersion: v1
kind: Service
metadata:
  name: hello
  namespace: hello
spec:
  selector: {app: hello}
  ports:
    - port: 80
      targetPort: 8080
`

func helloApplication(placement string) string {
	return `apiVersion: apps.cluster-init.dev/v1alpha1
kind: Application
metadata:
  name: hello
spec:
  sourceRef:
    kind: GitRepository
    name: cluster-init
  path: ./clusters/management/apps/hello/manifests
  timeout: 1m
  placement:
` + placement
}

// An application placed on clusters by commits only: on the workload cluster, moved to the
// management cluster (there first, then gone from the workload cluster), on both with one summed
// Ready, broken on one cluster only, and on a cluster that does not exist.
func TestApplicationsArePlacedByCommits(t *testing.T) {
	requireTestbedImage(t, "cluster-init-testbed/hello:v1")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Minute)
	defer cancel()
	r, _ := bootstrapFromGit(t, ctx)
	kc := managementKubeconfig()
	r.write(t, "clusters/management/workload-clusters/wl1/cluster.yaml", readFile(t, filepath.Join(repo, "environment-values/workload-clusters/example/cluster.yaml")))
	pushed := r.commit(t, "workload cluster wl1")
	waitFor(t, 20*time.Minute, "the CNI of wl1 Ready", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "kustomization", "wl1-cni", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`) == "True"
	})
	t.Logf("push -> wl1 with its CNI: %s", time.Since(pushed).Round(time.Second))
	wlkc := filepath.Join(t.TempDir(), "wl1.kubeconfig")
	data, err := base64.StdEncoding.DecodeString(kubectl(t, kc, "-n", "workload-clusters", "get", "secret", "wl1-kubeconfig", "-o", "jsonpath={.data.value}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wlkc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	available := func(kubeconfig string) bool {
		return kubectlQuiet(kubeconfig, "-n", "hello", "get", "deployment", "hello", "-o", "jsonpath={.status.availableReplicas}") == "1"
	}
	gone := func(kubeconfig string) bool {
		return kubectlQuiet(kubeconfig, "get", "namespace", "hello", "-o", "name") == ""
	}
	appStatus := func() string {
		return kubectlQuiet(kc, "-n", "cluster-init", "get", "application", "hello", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
	}
	dir := "clusters/management/apps/hello/"
	r.write(t, dir+"kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [application.yaml]\n")
	r.write(t, dir+"manifests/hello.yaml", strings.Replace(helloManifests, "FAIL_ON", "", 1))

	// 1. On wl1: running there, absent from the management cluster.
	r.write(t, dir+"application.yaml", helloApplication("    clusters: [workload-clusters/wl1]\n"))
	pushed = r.commit(t, "hello on wl1")
	waitFor(t, 10*time.Minute, "hello running in wl1", func() bool { return available(wlkc) })
	t.Logf("push -> hello running in wl1: %s", time.Since(pushed).Round(time.Second))
	logApplicationTimeline(t, kc, wlkc, pushed, client.ObjectKey{Namespace: "workload-clusters", Name: "wl1"})
	if !gone(kc) {
		t.Error("hello runs in the management cluster too")
	}
	waitFor(t, 2*time.Minute, "hello Ready", func() bool { return strings.HasPrefix(appStatus(), "True ") })

	// 2. Moved to the management cluster: running there before it is gone from wl1.
	r.write(t, dir+"application.yaml", helloApplication("    clusters: [management]\n"))
	pushed = r.commit(t, "hello moves to the management cluster")
	var upAt, goneAt time.Time
	waitFor(t, 10*time.Minute, "hello moved", func() bool {
		if upAt.IsZero() && available(kc) {
			upAt = time.Now()
		}
		if goneAt.IsZero() && gone(wlkc) {
			goneAt = time.Now()
		}
		return !upAt.IsZero() && !goneAt.IsZero()
	})
	if goneAt.Before(upAt) {
		t.Errorf("hello left wl1 (%s after the push) before it ran in the management cluster (%s): no instance in between",
			goneAt.Sub(pushed).Round(time.Second), upAt.Sub(pushed).Round(time.Second))
	}
	t.Logf("push -> hello running in the management cluster: %s, gone from wl1: %s", upAt.Sub(pushed).Round(time.Second), goneAt.Sub(pushed).Round(time.Second))

	// 3. On both: one summed Ready.
	r.write(t, dir+"application.yaml", helloApplication("    clusters: [management, workload-clusters/wl1]\n"))
	pushed = r.commit(t, "hello on both")
	waitFor(t, 10*time.Minute, "hello Ready on both", func() bool { return appStatus() == "True ready on 2 clusters" })
	t.Logf("push -> hello Ready on both: %s", time.Since(pushed).Round(time.Second))
	if !available(kc) || !available(wlkc) {
		t.Error("Ready on both, but not running on both")
	}

	// 4. Broken on wl1 only: not Ready, and the message names wl1.
	r.write(t, dir+"manifests/hello.yaml", strings.Replace(helloManifests, "FAIL_ON", "\n            - --fail-on=wl1", 1))
	pushed = r.commit(t, "hello fails on wl1")
	waitFor(t, 10*time.Minute, "hello not Ready, naming wl1", func() bool {
		s := appStatus()
		return strings.HasPrefix(s, "False ") && strings.Contains(s, "workload-clusters/wl1 failed")
	})
	t.Logf("push -> the failure on wl1 in the summed status: %s (%s)", time.Since(pushed).Round(time.Second), appStatus())
	if s := appStatus(); strings.Contains(s, "management failed") || strings.Contains(s, "management progressing") {
		t.Errorf("the management cluster is named as failing: %s", s)
	}

	// 5. Repaired, and placed on a cluster that does not exist too: named, the others unaffected.
	r.write(t, dir+"manifests/hello.yaml", strings.Replace(helloManifests, "FAIL_ON", "", 1))
	r.write(t, dir+"application.yaml", helloApplication("    clusters: [management, workload-clusters/wl1, nope]\n"))
	pushed = r.commit(t, "hello repaired, and on a cluster that does not exist")
	waitFor(t, 10*time.Minute, "hello naming the missing cluster, Ready elsewhere", func() bool {
		s := appStatus()
		return strings.Contains(s, "ready on 2 of 3 clusters") && strings.Contains(s, "nope missing")
	})
	t.Logf("push -> the missing cluster named, the two others Ready: %s", time.Since(pushed).Round(time.Second))
	status := bootstrapOK(t, "status", env, "--repo", r.dir, "--age-key-file", r.key)
	for _, want := range []string{"applications:", "cluster-init/hello: ready on 2 of 3 clusters", "workload-clusters/wl1: Ready", "cluster-init/nope: Missing (no Cluster nope in cluster-init"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}

	// 6. Removed by a commit: gone from every cluster.
	if err := os.RemoveAll(filepath.Join(r.dir, dir)); err != nil {
		t.Fatal(err)
	}
	pushed = r.commit(t, "remove hello")
	waitFor(t, 10*time.Minute, "hello gone from both clusters", func() bool { return gone(kc) && gone(wlkc) })
	t.Logf("push -> hello removed from both: %s", time.Since(pushed).Round(time.Second))
}

// logApplicationTimeline says where the time from a push to hello running on a cluster went: the
// source's fetch, the Application applied from git, the Flux object the placement controller
// made (in the cluster's namespace), and on the cluster the Deployment, its pod scheduled, started and Ready.
func logApplicationTimeline(t *testing.T, kc, clusterKubeconfig string, pushed time.Time, cluster client.ObjectKey) {
	t.Helper()
	at := func(stamp string) string {
		ts, err := time.Parse(time.RFC3339, strings.TrimSpace(stamp))
		if err != nil {
			return "?"
		}
		return "+" + ts.Sub(pushed.Truncate(time.Second)).Round(time.Second).String()
	}
	placed := placement.ObjectName(client.ObjectKey{Namespace: "cluster-init", Name: "hello"}, cluster)
	ready := `{.status.conditions[?(@.type=="Ready")].lastTransitionTime}`
	parts := []string{
		"source fetched " + at(kubectlQuiet(kc, "-n", "cluster-init", "get", "gitrepository", "cluster-init", "-o", "jsonpath={.status.artifact.lastUpdateTime}")),
		"Application created " + at(kubectlQuiet(kc, "-n", "cluster-init", "get", "application", "hello", "-o", "jsonpath={.metadata.creationTimestamp}")),
		"Kustomization " + placed + " created " + at(kubectlQuiet(kc, "-n", cluster.Namespace, "get", "kustomization", placed, "-o", "jsonpath={.metadata.creationTimestamp}")) +
			", Ready " + at(kubectlQuiet(kc, "-n", cluster.Namespace, "get", "kustomization", placed, "-o", "jsonpath="+ready)),
		"Deployment created " + at(kubectlQuiet(clusterKubeconfig, "-n", "hello", "get", "deployment", "hello", "-o", "jsonpath={.metadata.creationTimestamp}")),
	}
	pods := kubectlQuiet(clusterKubeconfig, "-n", "hello", "get", "pods", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.creationTimestamp} {.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime} {.status.containerStatuses[0].state.running.startedAt} {.status.conditions[?(@.type=="Ready")].lastTransitionTime}{"\n"}{end}`)
	for _, l := range strings.Split(pods, "\n") {
		if f := strings.Fields(l); len(f) == 5 {
			parts = append(parts, fmt.Sprintf("pod %s created %s, scheduled %s, started %s, Ready %s", f[0], at(f[1]), at(f[2]), at(f[3]), at(f[4])))
		}
	}
	t.Logf("timeline from the push: %s", strings.Join(parts, "; "))
}
