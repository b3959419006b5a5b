package kustomize

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// diskCache keeps builds in a directory, like Go's build cache: an entry's name is the hash of
// everything the build depends on (the tree's content, the Kustomization, the versions of the
// libraries that build), so an entry is never stale, only unused. Failing to read or write an
// entry only costs a build.
type diskCache struct {
	dir string
	// prefix is the part of every key that is the same for the whole tree.
	prefix string
}

// maxEntries is how many builds the cache keeps; the least recently used go first.
const maxEntries = 400

// cacheFormat changes when what an entry holds changes.
const cacheFormat = "1"

func newDiskCache(dir, root string) (*diskCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("build cache %s: %w", dir, err)
	}
	tree, err := treeDigest(root)
	if err != nil {
		return nil, fmt.Errorf("build cache: digest of %s: %w", root, err)
	}
	return &diskCache{dir: dir, prefix: cacheFormat + "\x00" + libraryVersions() + "\x00" + tree}, nil
}

func (d *diskCache) path(key string) string {
	sum := sha256.Sum256([]byte(d.prefix + "\x00" + key))
	return filepath.Join(d.dir, hex.EncodeToString(sum[:])+".json.gz")
}

func (d *diskCache) read(key string) ([]*unstructured.Unstructured, bool) {
	path := d.path(key)
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, false
	}
	var raw []json.RawMessage
	if err := json.NewDecoder(zr).Decode(&raw); err != nil {
		return nil, false
	}
	objs := make([]*unstructured.Unstructured, len(raw))
	for i, data := range raw {
		// The API machinery's JSON, so that numbers are int64 as in a fresh build.
		objs[i] = &unstructured.Unstructured{}
		if err := objs[i].UnmarshalJSON(data); err != nil {
			return nil, false
		}
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now) // recently used
	return objs, true
}

func (d *diskCache) write(key string, objs []*unstructured.Unstructured) {
	raw := make([]map[string]any, len(objs))
	for i, o := range objs {
		raw[i] = o.Object
	}
	f, err := os.CreateTemp(d.dir, ".entry-*")
	if err != nil {
		return
	}
	defer os.Remove(f.Name())
	zw := gzip.NewWriter(f)
	err = json.NewEncoder(zw).Encode(raw)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || os.Rename(f.Name(), d.path(key)) != nil {
		return
	}
	d.prune()
}

// prune removes the least recently used entries beyond maxEntries.
func (d *diskCache) prune() {
	entries, err := os.ReadDir(d.dir)
	if err != nil || len(entries) <= maxEntries {
		return
	}
	type entry struct {
		name string
		used time.Time
	}
	var list []entry
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".json.gz") {
			list = append(list, entry{e.Name(), info.ModTime()})
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].used.Before(list[j].used) })
	for _, e := range list[:max(0, len(list)-maxEntries)] {
		_ = os.Remove(filepath.Join(d.dir, e.name))
	}
}

// treeDigest hashes every regular file of the tree: its path, size and content, in path order.
func treeDigest(root string) (string, error) {
	var paths []string
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	slices.Sort(paths)
	h := sha256.New()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(rel), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// libraryVersions are the versions of the modules that build: a new version may build otherwise.
func libraryVersions() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var out []string
	for _, d := range info.Deps {
		switch d.Path {
		case "sigs.k8s.io/kustomize/api", "sigs.k8s.io/kustomize/kyaml", "github.com/fluxcd/pkg/kustomize", "github.com/fluxcd/pkg/envsubst":
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Path + "@" + d.Replace.Version
			}
			out = append(out, d.Path+"@"+v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
