package tenantsources

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"cluster-init.dev/cluster-init/internal/boundedfile"
)

// Bounds are what a tenant's directory may cost the controllers that build it. A directory past
// one of them is refused before any controller parses it.
type Bounds struct {
	// ArtifactBytes bounds the compressed artifact fetched from source-controller.
	ArtifactBytes int64
	// Files bounds the entries of the artifact (files and directories).
	Files int
	// FileBytes bounds one file, TotalBytes all of them uncompressed.
	FileBytes, TotalBytes int64
	// CheckManifest checks a manifest file's bytes (its YAML documents, aliases and depth), as the
	// CLI checks the same files before a commit, the aliases of every manifest of the directory
	// against one budget. name is the file's path in the artifact.
	CheckManifest func(name string, data []byte, budget *boundedfile.Budget) error
}

// Summary is what a checked directory holds.
type Summary struct {
	Files, Manifests int
	Bytes            int64
}

// RefusedError is a directory past a bound: the tenant's to fix, not a fault of the platform.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

func refused(format string, a ...any) error { return &RefusedError{Reason: fmt.Sprintf(format, a...)} }

// IsRefused tells whether err is a directory refused for a bound.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// Check reads a tenant's artifact (a gzipped tar, as source-controller writes it) within b: only
// regular files and directories, inside the artifact, each file and all of them within their
// sizes, every manifest checked by b.CheckManifest. Memory is bounded by b's sizes whatever the
// archive claims. A refusal is a *RefusedError naming the file and the bound.
func Check(tarball []byte, b Bounds) (Summary, error) {
	var s Summary
	if int64(len(tarball)) > b.ArtifactBytes {
		return s, refused("the directory is %d bytes compressed: expected at most %d", len(tarball), b.ArtifactBytes)
	}
	gz, err := gzip.NewReader(bytes.NewReader(tarball))
	if err != nil {
		return s, fmt.Errorf("read the artifact: %w", err)
	}
	tr := tar.NewReader(gz)
	budget := boundedfile.NewBudget("the directory")
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return s, fmt.Errorf("read the artifact: %w", err)
		}
		s.Files++
		if s.Files > b.Files {
			return s, refused("more than %d files and directories: expected at most %d", b.Files, b.Files)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return s, refused("%s: a path outside the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return s, refused("%s: not a regular file (a link or a device): expected files and directories only", name)
		}
		if h.Size > b.FileBytes {
			return s, refused("%s: %d bytes: expected a file of at most %d", name, h.Size, b.FileBytes)
		}
		if s.Bytes+h.Size > b.TotalBytes {
			return s, refused("%s: the directory's files add up to more than %d bytes", name, b.TotalBytes)
		}
		data, err := io.ReadAll(io.LimitReader(tr, b.FileBytes+1))
		if err != nil {
			return s, fmt.Errorf("read %s of the artifact: %w", name, err)
		}
		if int64(len(data)) != h.Size {
			return s, fmt.Errorf("read %s of the artifact: %d bytes, its header says %d", name, len(data), h.Size)
		}
		s.Bytes += h.Size
		if !boundedfile.IsManifest(name) {
			continue
		}
		s.Manifests++
		if err := b.CheckManifest(name, data, budget); err != nil {
			return s, &RefusedError{Reason: err.Error()}
		}
	}
}
