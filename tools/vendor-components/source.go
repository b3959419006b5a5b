package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// module is a Go module downloaded into the module cache.
type module struct {
	Path    string
	Version string
	Dir     string
	Sum     string
}

func (m module) String() string { return m.Path + "@" + m.Version }

// download fetches path@version through the Go module proxy. Modules whose checksum-database
// entry the proxy does not serve are fetched with GONOSUMDB; their h1 hash is written into the
// vendored file's header, so a change of content shows up as a diff.
func download(ctx context.Context, workDir, path, version string, noSumDB bool) (module, error) {
	dir, err := os.MkdirTemp(workDir, "download-")
	if err != nil {
		return module{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module vendor-components/download\n\ngo 1.26\n"), 0o644); err != nil {
		return module{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	if noSumDB {
		cmd.Env = append(cmd.Env, "GONOSUMDB="+path)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var m struct {
		Path, Version, Dir, Sum, Error string
	}
	if jsonErr := json.Unmarshal(out, &m); jsonErr == nil && m.Error != "" {
		return module{}, fmt.Errorf("download %s@%s: %s", path, version, m.Error)
	}
	if err != nil {
		return module{}, fmt.Errorf("download %s@%s: %w: %s", path, version, err, strings.TrimSpace(stderr.String()))
	}
	if m.Dir == "" {
		return module{}, fmt.Errorf("download %s@%s: go mod download gave no directory", path, version)
	}
	return module{Path: m.Path, Version: m.Version, Dir: m.Dir, Sum: m.Sum}, nil
}

// kustomizeBuild runs kustomize (krusty, default options like `kustomize build`) on dir.
func kustomizeBuild(dir string) ([]*unstructured.Unstructured, error) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	data, err := resMap.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return utils.ReadObjects(bytes.NewReader(data))
}

// rewriteLines applies a regexp replacement to every line of a file, as the upstream release
// Makefiles do with sed (set-manifest-image, set-manifest-pull-policy).
func rewriteLines(path string, re *regexp.Regexp, replace func(match []string) string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(data), "\n")
	changed := false
	for i, line := range lines {
		if m := re.FindStringSubmatch(line); m != nil {
			lines[i] = replace(m)
			changed = true
		}
	}
	if !changed {
		return fmt.Errorf("%s: no line matches %s", path, re)
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}

// makeVariable reads `NAME ?= value` (or :=, =) from a Makefile.
func makeVariable(makefile, name string) (string, error) {
	data, err := os.ReadFile(makefile)
	if err != nil {
		return "", err
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s*[?:]?=\s*(\S+)\s*$`)
	m := re.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s: no variable %s", makefile, name)
	}
	return string(m[1]), nil
}
