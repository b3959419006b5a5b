//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// providersReadyAt is when the last of the given units turned ready, from the plain output's
// "+1m41s    unit cabpr: ready after 21s" lines.
func providersReadyAt(t *testing.T, out string, providers ...string) time.Duration {
	t.Helper()
	var last time.Duration
	for _, p := range providers {
		m := regexp.MustCompile(`(?m)^\S+ \+(\S+)\s+unit ` + regexp.QuoteMeta(p) + `: ready after`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("unit %s never turned ready", p)
			continue
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatalf("offset %q: %v", m[1], err)
		}
		last = max(last, d)
	}
	return last
}

// copyEnvironment copies an environment of the checkout into a directory of the test, with its
// secrets replaced.
func copyEnvironment(t *testing.T, name, dirName, secrets string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), dirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"kustomization.yaml", "values.yaml"} {
		data, err := os.ReadFile(filepath.Join(repo, "environment-values", name, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets.yaml"), []byte(secrets), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func assertContains(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// rke2-capd runs up to the wall of this machine: the RKE2 providers run, CAPD creates the
// machines with the RKE2 bootstrap data, and the machines cannot install RKE2 offline. The
// conclusion names the unit, the machine, the command that failed and the values that would let
// it go on; air-gapped, the machines install from their image instead, and say what it lacks.
func TestRKE2MeetsTheWallAndSaysWhatWouldLetItGoOn(t *testing.T) {
	requireEveryTestbedImage(t)
	const rke2 = "rke2-capd"
	cleanup(t, rke2)
	t.Cleanup(func() { cleanup(t, rke2) })
	// The cluster unit's own timeout, shortened: the conclusion comes when it is spent.
	short := writeValues(t, "units:\n  cluster:\n    timeout: 3m\n")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	r := bootstrap(t, ctx, nil, rke2, "--values", testbedVs, "--values", short, "--output", "plain")
	r.report(t, "bootstrap "+rke2+" (downloads RKE2)")
	out := r.output.String()
	if r.err == nil {
		t.Fatal("the bootstrap of rke2-capd succeeded on a machine that cannot download RKE2")
	}
	ready := providersReadyAt(t, out, "cert-manager", "capi", "cabpr", "capd")
	conclusion := out[strings.LastIndex(out, "the bootstrap is stuck"):]
	assertContains(t, "the conclusion", conclusion,
		"unit cluster failed after",
		"Machine management-control-plane-",
		"rke2-server.service does not exist",
		"what to look at: RKE2 machines download RKE2",
		"cluster.rke2_air_gapped.enabled: true",
		"proxies.https_proxy")
	kc := filepath.Join(state.KindClusters(), "cluster-init-bootstrap", "kubeconfig")
	// The machines CAPD made carry the RKE2 bootstrap data.
	secret := kubectl(t, kc, "-n", "cluster-init", "get", "rke2config", "-o", "jsonpath={.items[*].status.dataSecretName}")
	if secret == "" {
		t.Error("no RKE2Config has bootstrap data")
	}
	if ctrs := docker(t, "ps", "--filter", "label=io.x-k8s.kind.cluster=management", "--format", "{{.Names}}"); !strings.Contains(ctrs, "management-control-plane-") {
		t.Errorf("no control plane container of management: %q", ctrs)
	}
	t.Logf("rke2-capd: providers Ready at +%s, conclusion after %s (cluster unit timeout 3m)", ready, r.wall.Round(time.Second))

	// Air-gapped: the machines run the install script of their image. An image without the
	// artifacts (this machine cannot have them) fails there, and the conclusion says what the
	// image lacks.
	cleanup(t, rke2)
	image := "cluster-init/rke2-node-without-artifacts:v1.37.0"
	docker(t, "tag", "kindest/node:v1.37.0", image)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", image).Run() })
	airGapped := writeValues(t, "cluster:\n  rke2_air_gapped:\n    enabled: true\n  capd:\n    node_image: "+image+"\nunits:\n  cluster:\n    timeout: 3m\n")
	r = bootstrap(t, ctx, nil, rke2, "--values", testbedVs, "--values", airGapped, "--output", "plain")
	r.report(t, "bootstrap "+rke2+" (air-gapped)")
	out = r.output.String()
	if r.err == nil {
		t.Fatal("the air-gapped bootstrap succeeded with an image that has no RKE2 artifacts")
	}
	conclusion = out[strings.LastIndex(out, "the bootstrap is stuck"):]
	assertContains(t, "the air-gapped conclusion", conclusion,
		"unit cluster failed after",
		"/opt/install.sh",
		"what to look at: Air-gapped RKE2 installs from /opt/rke2-artifacts")
	if got := kubectl(t, kc, "-n", "cluster-init", "get", "rke2controlplane", "-o", "jsonpath={.items[*].spec.agentConfig.airGapped}"); got != "true" {
		t.Errorf("RKE2ControlPlane agentConfig.airGapped = %q", got)
	}
	if got := kubectl(t, kc, "-n", "cluster-init", "get", "dockermachine", "-o", "jsonpath={.items[*].spec.customImage}"); !strings.Contains(got, image) {
		t.Errorf("the machines do not run the air-gapped image: %q", got)
	}
	t.Logf("rke2-capd air-gapped: conclusion after %s", r.wall.Round(time.Second))
}

// keystone is an OpenStack identity endpoint that refuses every credential, as a cloud does
// with a revoked application credential; it records what it was sent.
type keystone struct {
	url string
	mu  sync.Mutex
	got []string
}

func startKeystone(t *testing.T) *keystone {
	t.Helper()
	// The kind network's gateway: this host, as the pods of kind reach it.
	var nets []struct {
		IPAM struct{ Config []struct{ Gateway string } }
	}
	if err := json.Unmarshal([]byte(docker(t, "network", "inspect", "kind")), &nets); err != nil || len(nets) == 0 {
		t.Fatalf("network kind: %v", err)
	}
	gateway := ""
	for _, c := range nets[0].IPAM.Config {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			gateway = c.Gateway
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(gateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	k := &keystone{url: "http://" + l.Addr().String() + "/v3"}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		k.mu.Lock()
		k.got = append(k.got, r.Method+" "+r.URL.Path+" "+string(body))
		k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte(`{"version": {"id": "v3.14", "status": "stable", "links": [{"rel": "self", "href": "` + k.url + `/"}]}}`))
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return k
}

func (k *keystone) requests() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.got)
}

// kubeadm-capo against an OpenStack that refuses the credentials: the providers run, CAPO
// receives the clouds.yaml of the environment's secrets and is refused; the conclusion names the
// cluster unit and CAPO's own error, without the secret, well before the unit's 30m timeout;
// cleanup then removes everything without waiting on a finalizer that can never finish.
func TestOpenStackThatRefusesTheCredentials(t *testing.T) {
	requireEveryTestbedImage(t)
	const secret = "SENTINEL-capo-7d20e4"
	ks := startKeystone(t)
	dir := copyEnvironment(t, "kubeadm-capo", "capo-refused", `credentials:
  openstack:
    clouds_yaml: |
      clouds:
        openstack:
          auth:
            auth_url: `+ks.url+`
            application_credential_id: e2e-application-credential
            application_credential_secret: `+secret+`
          region_name: RegionOne
          interface: public
          identity_api_version: 3
          auth_type: v3applicationcredential
    cacert: ""
`)
	cleanup(t, dir)
	t.Cleanup(func() { cleanup(t, dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// The user's bound on the wait: --timeout, far below the cluster unit's 30m.
	r := bootstrap(t, ctx, nil, dir, "--values", testbedVs, "--output", "plain", "--timeout", "5m")
	r.report(t, "bootstrap kubeadm-capo (credentials refused)")
	out := r.output.String()
	if r.err == nil {
		t.Fatal("the bootstrap succeeded against a cloud that refuses every credential")
	}
	ready := providersReadyAt(t, out, "cert-manager", "capi", "cabpk", "orc", "capo")
	conclusion := out[strings.LastIndex(out, "the bootstrap is stuck"):]
	assertContains(t, "the conclusion", conclusion,
		"unit cluster is not ready after",
		"OpenStackCluster management: infrastructure-openstack controller",
		"providerClient authentication err",
		"got 401 instead",
		"what to look at: CAPO reaches the OpenStack cloud")
	if strings.Contains(out, secret) {
		t.Error("the secret of the application credential is in the output")
	}
	// CAPO was refused with the environment's credentials: what it sent is what secrets.yaml says.
	sent := false
	for _, req := range ks.requests() {
		if strings.HasPrefix(req, "POST /v3/auth/tokens") && strings.Contains(req, "e2e-application-credential") && strings.Contains(req, secret) {
			sent = true
		}
	}
	if !sent {
		t.Errorf("CAPO never sent the environment's credentials to the identity endpoint: %v", ks.requests())
	}
	t.Logf("kubeadm-capo: providers Ready at +%s, conclusion after %s (run --timeout 5m, cluster unit timeout 30m)", ready, r.wall.Round(time.Second))

	// CAPO adds its finalizer once it has authenticated; a cloud that stops answering after that
	// leaves a finalizer CAPO can never remove. Added here as CAPO adds it.
	kc := filepath.Join(state.KindClusters(), "cluster-init-bootstrap", "kubeconfig")
	kubectl(t, kc, "-n", "cluster-init", "patch", "openstackcluster", "management", "--type", "merge",
		"-p", `{"metadata":{"finalizers":["openstackcluster.infrastructure.cluster.x-k8s.io"]}}`)
	start := time.Now()
	c := bootstrap(t, ctx, nil, "cleanup", dir)
	if c.err != nil {
		t.Fatalf("cleanup: %v", c.err)
	}
	assertContains(t, "the cleanup", c.output.String(),
		"OpenStackCluster management: infrastructure-openstack controller",
		"Its provider recorded nothing it created: nothing is left behind, not waiting for it",
		"nothing its provider made is left")
	if c.wall > 2*time.Minute {
		t.Errorf("cleanup took %s: it waited on what cannot finish", c.wall.Round(time.Second))
	}
	if left := kindClusters(t); slices.Contains(left, "cluster-init-bootstrap") {
		t.Errorf("kind cluster left after cleanup: %v", left)
	}
	t.Logf("kubeadm-capo cleanup: %s", time.Since(start).Round(time.Second))
}
