package tenantsources

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"cluster-init.dev/cluster-init/internal/atomicfile"
)

// Store keeps the last checked artifact of each tenant on disk, and serves them over HTTP to the
// shards' kustomize-controllers, at the URLs written in the ExternalArtifacts.
type Store struct {
	// Dir holds <tenant>/<digest hex>.tar.gz.
	Dir string
	// BaseURL is where the controllers reach ServeHTTP (http://<service>.<namespace>.svc...).
	BaseURL string
}

// servedPath is the only form of path the store serves: a tenant (a DNS label) and a digest.
var (
	servedPath = regexp.MustCompile(`^/?([a-z0-9]([-a-z0-9]*[a-z0-9])?)/([0-9a-f]{64,128})\.tar\.gz$`)
	tenantName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// relPath is an artifact's path in the store.
func relPath(tenant, digest string) string {
	_, hexDigest, _ := strings.Cut(digest, ":")
	return tenant + "/" + hexDigest + ".tar.gz"
}

// URL is where an artifact of the store is served.
func (s *Store) URL(rel string) string { return strings.TrimSuffix(s.BaseURL, "/") + "/" + rel }

// Has tells whether the store holds an artifact.
func (s *Store) Has(rel string) bool {
	_, err := os.Stat(filepath.Join(s.Dir, filepath.FromSlash(rel)))
	return err == nil
}

// Put keeps data as the tenant's artifact, and drops the tenant's earlier ones.
func (s *Store) Put(tenant, digest string, data []byte) (string, error) {
	rel := relPath(tenant, digest)
	if !servedPath.MatchString(rel) {
		return "", fmt.Errorf("keep the artifact of tenant %s: %q is not a tenant and a digest", tenant, rel)
	}
	dir := filepath.Join(s.Dir, tenant)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("keep the artifact of tenant %s: %w", tenant, err)
	}
	if err := atomicfile.Write(filepath.Join(s.Dir, filepath.FromSlash(rel)), data, 0o640); err != nil {
		return "", fmt.Errorf("keep the artifact of tenant %s: %w", tenant, err)
	}
	return rel, s.drop(tenant, rel)
}

// Drop removes every artifact of a tenant.
func (s *Store) Drop(tenant string) error { return s.drop(tenant, "") }

func (s *Store) drop(tenant, keep string) error {
	if !tenantName.MatchString(tenant) {
		return nil // nothing of it was kept: Put keeps DNS labels only
	}
	entries, err := os.ReadDir(filepath.Join(s.Dir, tenant))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("drop the artifacts of tenant %s: %w", tenant, err)
	}
	for _, e := range entries {
		if tenant+"/"+e.Name() == keep {
			continue
		}
		if err := os.Remove(filepath.Join(s.Dir, tenant, e.Name())); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("drop the artifacts of tenant %s: %w", tenant, err)
		}
	}
	return nil
}

// ServeHTTP answers a GET of an artifact of the store, and nothing else.
func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !servedPath.MatchString(r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	http.ServeFile(w, r, filepath.Join(s.Dir, filepath.FromSlash(strings.TrimPrefix(r.URL.Path, "/"))))
}

// Fetch downloads an artifact of at most max bytes and checks it against its digest
// ("<algorithm>:<hex>", as source-controller writes it).
func Fetch(ctx context.Context, c *http.Client, url, digest string, max int64) ([]byte, error) {
	algo, want, ok := strings.Cut(digest, ":")
	var h hash.Hash
	switch {
	case !ok:
		return nil, fmt.Errorf("fetch %s: digest %q: expected <algorithm>:<hex>", url, digest)
	case algo == "sha256":
		h = sha256.New()
	case algo == "sha384":
		h = sha512.New384()
	case algo == "sha512":
		h = sha512.New()
	default:
		return nil, fmt.Errorf("fetch %s: digest algorithm %q: expected sha256, sha384 or sha512", url, algo)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	if int64(len(data)) > max {
		return nil, refused("the directory is more than %d bytes compressed: expected at most %d", max, max)
	}
	h.Write(data)
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return nil, fmt.Errorf("fetch %s: digest %s:%s, expected %s", url, algo, got, digest)
	}
	return data, nil
}
