//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// receiverNodePort is the node port the test bed's environments serve their Receiver on
// (notifications.receiver.node_port), which the git server's webhook calls.
const receiverNodePort = "30292"

// newReceiverToken is a random token for the environment's Receiver
// (credentials.notifications.receiver_token).
func newReceiverToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// receiverURL is the webhook URL of the management cluster's Receiver, as a GitLab project's
// webhook is set: a node of the cluster at the node port, and the path Flux gives the Receiver
// once it is ready. port replaces the node port (a port nothing serves: the receiver unreachable).
func receiverURL(t *testing.T, kc, port string) string {
	t.Helper()
	var path string
	waitFor(t, 5*time.Minute, "the Receiver cluster-init Ready with its webhook path", func() bool {
		out := kubectlQuiet(kc, "-n", "cluster-init", "get", "receiver", "cluster-init", "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.webhookPath}`)
		ready, p, _ := strings.Cut(out, " ")
		path = p
		return ready == "True" && strings.HasPrefix(p, "/hook/")
	})
	node := kubectl(t, kc, "get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o",
		`jsonpath={.items[0].status.addresses[?(@.type=="InternalIP")].address}`)
	return "http://" + node + ":" + port + path
}

// connectReceiver points the git server's webhook at the management cluster's Receiver: from
// now on a push is announced to it, as GitLab announces it. Removed when the test ends.
func connectReceiver(t *testing.T, r *repository, url string) {
	t.Helper()
	// The URL's path is derived from the token: both go to the script in files.
	dir := t.TempDir()
	urlFile, tokenFile := filepath.Join(dir, "receiver-url"), filepath.Join(dir, "receiver-token")
	for file, content := range map[string]string{urlFile: url, tokenFile: r.receiverToken} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gitServer(t, "hooks", "set", urlFile, tokenFile)
	t.Cleanup(func() { gitServer(t, "hooks", "clear") })
}

// requestedAt is the last reconciliation a Receiver (or anyone) asked of the management
// cluster's source: the receiver's mark on it.
func requestedAt(kc string) string {
	return kubectlQuiet(kc, "-n", "cluster-init", "get", "gitrepository", "cluster-init", "-o",
		`jsonpath={.metadata.annotations.reconcile\.fluxcd\.io/requestedAt}`)
}

// sourceAt is the commit of the management cluster's source's artifact.
func sourceAt(kc string) string {
	rev := kubectlQuiet(kc, "-n", "cluster-init", "get", "gitrepository", "cluster-init", "-o", "jsonpath={.status.artifact.revision}")
	_, sha, _ := strings.Cut(rev, "@sha1:")
	return sha
}

// waitForSource waits until the management cluster's source has fetched commit, looking every
// half second: the time a push takes to reach the cluster.
func waitForSource(t *testing.T, kc, commit string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for sourceAt(kc) != commit {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for the management cluster's source at %s (at %q)", timeout, commit, sourceAt(kc))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(start)
}

// logTimeline says when each object of a push's chain was created and when each machine of
// cluster became Ready, counted from the push: where the time to a workload cluster goes.
func logTimeline(t *testing.T, kc string, pushed time.Time, ns string, objects [][2]string, cluster string) {
	t.Helper()
	at := func(stamp string) string {
		ts, err := time.Parse(time.RFC3339, stamp)
		if err != nil {
			return "?"
		}
		return "+" + ts.Sub(pushed.Truncate(time.Second)).Round(time.Second).String()
	}
	var parts []string
	for _, o := range objects {
		parts = append(parts, o[0]+" "+o[1]+" created "+at(kubectlQuiet(kc, "-n", ns, "get", o[0], o[1], "-o", "jsonpath={.metadata.creationTimestamp}")))
	}
	lines := kubectlQuiet(kc, "-n", ns, "get", "machines", "-l", "cluster.x-k8s.io/cluster-name="+cluster, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.creationTimestamp} {.status.conditions[?(@.type=="BootstrapConfigReady")].lastTransitionTime} {.status.conditions[?(@.type=="InfrastructureReady")].lastTransitionTime} {.status.conditions[?(@.type=="Ready")].lastTransitionTime}{"\n"}{end}`)
	for _, l := range strings.Split(lines, "\n") {
		f := strings.Fields(l)
		if len(f) == 5 {
			parts = append(parts, fmt.Sprintf("machine %s created %s, bootstrap data %s, infrastructure ready %s, ready %s", f[0], at(f[1]), at(f[2]), at(f[3]), at(f[4])))
		}
	}
	t.Logf("timeline from the push: %s", strings.Join(parts, "; "))
}
