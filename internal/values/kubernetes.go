package values

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	capiversion "sigs.k8s.io/cluster-api/version"
)

// kubernetesVersions: every Kubernetes version of the values is one the pinned Cluster API makes
// clusters of, as its own code says: its kubeadm providers refuse what their kubeadm API
// versions do not cover, and its controllers run only on a management cluster of its minimum.
// Cluster API's code sets no upper bound (its documentation's table lists what was tested).
func (c *checker) kubernetesVersions(s Settings) {
	// The release's cluster is the management cluster but in a workload cluster's release.
	management := s.Context != "workload"
	if problem := kubernetesProblem(s.Cluster.KubernetesVersion, s.Cluster.Providers.Bootstrap, management); problem != "" {
		c.add("cluster.kubernetes_version", "%s", problem)
	}
	list, _ := lookup(c.merged, ParseKey("workload_clusters.kubernetes_versions"))
	items, _ := list.([]any)
	for i, item := range items {
		if v, ok := item.(string); ok {
			if problem := kubernetesProblem(v, s.Cluster.Providers.Bootstrap, false); problem != "" {
				c.addAt([]string{"workload_clusters", "kubernetes_versions", strconv.Itoa(i)}, "%s", problem)
			}
		}
	}
}

// kubernetesProblem says why Cluster API would not make a cluster of Kubernetes v with the
// bootstrap provider (a management cluster: one that runs Cluster API), or "". A version that
// does not parse is the schema's and versions' to say.
func kubernetesProblem(v, bootstrap string, management bool) string {
	version, err := semver.ParseTolerant(v)
	if err != nil || v == "" {
		return ""
	}
	if version.Major != 1 {
		return fmt.Sprintf("%q: Cluster API makes clusters of Kubernetes 1.x only: expected v1.MINOR.PATCH", v)
	}
	if bootstrap == "kubeadm" {
		if _, err := kubeadmtypes.KubeVersionToKubeadmAPIGroupVersion(version); err != nil {
			return fmt.Sprintf("%q: %v: expected a newer version", v, err)
		}
	}
	if management {
		minimum := semver.MustParse(strings.TrimPrefix(capiversion.MinimumKubernetesVersion, "v"))
		if version.LT(minimum) {
			return fmt.Sprintf("%q: Cluster API runs on a management cluster of Kubernetes %s or later: expected a newer version", v, capiversion.MinimumKubernetesVersion)
		}
	}
	return ""
}
