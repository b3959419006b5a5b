//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shardedTenants is how many tenants the shards' test runs, each in a shard of its own.
const shardedTenants = 10

// Ten tenants, each with a Flux shard of its own (the default): what the shards cost in memory,
// idle and with one cluster each (simulated in memory by CAPD, so that the machine holds them:
// the shards' controllers build and watch the same releases and units as for any cluster), and
// that every tenant's cluster comes up through its own shard while the platform's controllers
// reconcile none of them.
func TestTenTenantsEachInAShardOfItsOwn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	var values strings.Builder
	// The default tenant too has a prefix of its own: no two tenants may name a cluster alike.
	values.WriteString("workload_clusters:\n  tenants:\n    workload-clusters:\n      name_prefix: wl\n")
	for i := range shardedTenants {
		fmt.Fprintf(&values, "    team-%d:\n      name_prefix: t%d-\n      path: ./clusters/management/team-%d\n      infrastructure: in-memory\n      limits: {clusters: 1}\n", i, i, i)
	}
	r, _ := bootstrapFromGit(t, ctx, func(r *repository) {
		current := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
		r.write(t, "environment-values/"+env+"/values.yaml", current+values.String())
	})
	kc := managementKubeconfig()
	// Each tenant's shard and the default tenant's: two controllers each.
	shards := 2 * (shardedTenants + 1)
	var available string
	waitFor(t, 10*time.Minute, "every shard's controllers available", func() bool {
		available = kubectlQuiet(kc, "-n", "flux-system", "get", "deployments", "-l", "sharding.fluxcd.io/key", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.availableReplicas}{" "}{end}`)
		fields := strings.Fields(available)
		for _, f := range fields {
			if !strings.HasSuffix(f, "=1") {
				return false
			}
		}
		return len(fields) == shards
	})
	t.Logf("%d shards' controllers available: %s", shards, available)
	time.Sleep(30 * time.Second) // past the controllers' start
	t.Logf("the Flux controllers' memory, %d tenants and no cluster: %s", shardedTenants, fluxMemory(t, kc))

	for i := range shardedTenants {
		name := fmt.Sprintf("t%d-one", i)
		r.write(t, filepath.Join(fmt.Sprintf("clusters/management/team-%d", i), name, "cluster.yaml"), workloadCluster(name, "", ""))
	}
	pushed := r.commit(t, fmt.Sprintf("a cluster for each of %d tenants", shardedTenants))
	fetchSources(t, kc, shardedTenants)
	waitFor(t, 20*time.Minute, "every tenant's cluster Available", func() bool {
		n := 0
		for i := range shardedTenants {
			if kubectlQuiet(kc, "-n", fmt.Sprintf("team-%d", i), "get", "cluster", fmt.Sprintf("t%d-one", i), "-o",
				`jsonpath={.status.conditions[?(@.type=="Available")].status}`) == "True" {
				n++
			}
		}
		return n == shardedTenants
	})
	t.Logf("push -> %d tenants' clusters Available, each through its shard: %s", shardedTenants, time.Since(pushed).Round(time.Second))
	t.Logf("the Flux controllers' memory, %d tenants with a cluster each: %s", shardedTenants, fluxMemory(t, kc))

	// The platform's controllers reconciled none of the tenants' objects: every one of them
	// carries its tenant's shard, and each shard's controllers logged its tenant's objects only.
	for i := range shardedTenants {
		ns := fmt.Sprintf("team-%d", i)
		for _, kind := range []string{"kustomizations", "helmreleases"} {
			shards := strings.Fields(kubectlQuiet(kc, "-n", ns, "get", kind, "-o", `jsonpath={range .items[*]}{.metadata.labels.sharding\.fluxcd\.io/key}{" "}{end}`))
			for _, s := range shards {
				if s != ns {
					t.Errorf("a %s of %s in shard %q", kind, ns, s)
				}
			}
			if len(shards) == 0 {
				t.Errorf("no %s in %s", kind, ns)
			}
		}
	}
	for _, controller := range []string{"kustomize-controller", "helm-controller"} {
		logs := kubectlQuiet(kc, "-n", "flux-system", "logs", "deployment/"+controller, "--since=30m")
		if strings.Contains(logs, `"namespace":"team-`) {
			t.Errorf("the platform's %s reconciled a tenant's object", controller)
		}
	}
}

// fetchSources asks source-controller to fetch the sources of tenants team-0..team-(n-1) now.
func fetchSources(t *testing.T, kc string, n int) {
	t.Helper()
	now := time.Now().Format(time.RFC3339Nano)
	for i := range n {
		kubectlQuiet(kc, "-n", "cluster-init", "annotate", "--overwrite", "gitrepository", fmt.Sprintf("tenant-team-%d", i), "reconcile.fluxcd.io/requestedAt="+now)
	}
}
