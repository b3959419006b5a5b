package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/oci"
	"github.com/google/go-containerregistry/pkg/crane"
	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
)

// Digest is a digest of a snapshot's content (paths, modes and bytes, in path order): the same
// checkout content always gets the same artifact tag, so a re-run changes nothing.
func Digest(dir string) (string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// OCITarget is where an OCI source is published.
type OCITarget struct {
	// PushAddress is the registry as the CLI reaches it (127.0.0.1:5001).
	PushAddress string
	// ClusterAddress is the registry as the clusters reach it (cluster-init-registry:5000).
	ClusterAddress string
	// Repository is the path under which the artifacts go (cluster-init).
	Repository string
}

// Published says what was published and the `source` values that point at it.
type Published struct {
	Tag    string
	Charts []string
	Values map[string]any
}

// PushOCI publishes a snapshot as Flux expects an OCI source: the whole snapshot as a Flux
// artifact at <repository>/source, and every chart of it as a Helm OCI chart at
// <repository>/charts/<name>, all with the same tag, derived from the content. revision (the
// checkout's commit, if known) is recorded on the artifact.
func PushOCI(ctx context.Context, snapshot string, t OCITarget, revision string) (*Published, error) {
	digest, err := Digest(snapshot)
	if err != nil {
		return nil, fmt.Errorf("digest of the source: %w", err)
	}
	tag := "sha-" + digest[:16]

	client := oci.NewClient(append(oci.DefaultOptions(), crane.Insecure))
	url := fmt.Sprintf("%s/%s/source:%s", t.PushAddress, t.Repository, tag)
	meta := oci.Metadata{Source: "cluster-init checkout", Revision: revision}
	if _, err := client.Push(ctx, url, snapshot, oci.WithPushMetadata(meta)); err != nil {
		return nil, fmt.Errorf("push the source to %s: %w", url, err)
	}

	reg, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard))
	if err != nil {
		return nil, fmt.Errorf("registry client: %w", err)
	}
	charts, err := os.ReadDir(filepath.Join(snapshot, "charts"))
	if err != nil {
		return nil, fmt.Errorf("charts of the source: %w", err)
	}
	pub := &Published{Tag: tag}
	for _, c := range charts {
		if !c.IsDir() {
			continue
		}
		data, err := packageChart(filepath.Join(snapshot, "charts", c.Name()))
		if err != nil {
			return nil, err
		}
		ref := fmt.Sprintf("%s/%s/charts/%s:%s", t.PushAddress, t.Repository, c.Name(), tag)
		// The tag is the source's, not the chart version: not Helm's strict mode.
		if _, err := reg.Push(data, ref, registry.PushOptStrictMode(false)); err != nil {
			return nil, fmt.Errorf("push chart %s to %s: %w", c.Name(), ref, err)
		}
		pub.Charts = append(pub.Charts, c.Name())
	}
	pub.Values = map[string]any{
		"type":     "oci",
		"url":      fmt.Sprintf("oci://%s/%s", t.ClusterAddress, t.Repository),
		"ref":      map[string]any{"tag": tag},
		"insecure": true,
	}
	return pub, nil
}

func packageChart(dir string) ([]byte, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	ch, ok := c.(*chartv2.Chart)
	if !ok {
		return nil, fmt.Errorf("chart %s: unsupported chart API version", dir)
	}
	out, err := os.MkdirTemp("", "cluster-init-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	path, err := chartutil.Save(ch, out)
	if err != nil {
		return nil, fmt.Errorf("package chart %s: %w", dir, err)
	}
	return os.ReadFile(path)
}

// Revision is the checkout's commit, with "-dirty" when the source directories have uncommitted
// changes; empty outside git.
func Revision(ctx context.Context, repoRoot string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	status, err := exec.CommandContext(ctx, "git", append([]string{"-C", repoRoot, "status", "--porcelain", "--"}, Dirs...)...).Output()
	if err == nil && len(bytes.TrimSpace(status)) > 0 {
		rev += "-dirty"
	}
	return rev
}
