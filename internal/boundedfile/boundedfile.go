// Package boundedfile reads the files the CLI is given (an environment's values and secrets,
// --values files, the manifests of the tenants' and the applications' directories, an age key) at a
// cost that does not depend on what they hold: a device, a FIFO or a link out of the checkout is
// refused before it is read, a file is read through a limit (one that grows, or /dev/zero, costs
// its cap and no more), a walk reads a bounded number of files, and YAML is checked for what its
// parse would cost (aliases, documents, depth) before anything decodes it into values.
//
// The checks of bytes already read (Kind.Check, CheckManifest) are apart from the opening of a
// file, so that content from elsewhere (a tar entry of an artifact) is checked by the same rules.
package boundedfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Kind is a kind of file and its bounds.
type Kind struct {
	// Name says what the file is expected to be, in messages ("a values file").
	Name string
	// MaxBytes is the largest such file.
	MaxBytes int
	// Why explains MaxBytes to the person whose file is refused.
	Why string
	// YAML: the file is YAML, checked for aliases, depth, and at most MaxDocuments documents.
	YAML         bool
	MaxDocuments int
	// MaxTreeBytes bounds a directory of such files, when less than MaxTreeBytes.
	MaxTreeBytes int
}

// The kinds of files the CLI reads.
var (
	// Values is a values or secrets file, or an environment's kustomization.
	Values = Kind{Name: "a values file", MaxBytes: 512 << 10, YAML: true, MaxDocuments: 1,
		Why: "it is stored in a ConfigMap or Secret, at most 1 MiB with everything else in it"}
	// Manifest is a file of a tenant's directory or of the applications' directory: a
	// workload cluster's HelmRelease, an Application, their kustomization.
	// Its directory holds at most 4 MiB: kustomize-controller builds it whole, and holds tens of
	// times its size in memory (a tenant's shard has 512 MiB).
	Manifest = Kind{Name: "a manifest file", MaxBytes: 256 << 10, YAML: true, MaxDocuments: 1000, MaxTreeBytes: 4 << 20,
		Why: "a workload cluster's or an application's file is a few KiB; 256 KiB is what the API server allows of an object's annotations"}
	// PlacedManifest is a file of an application's manifests (spec.path), which may hold CRDs.
	PlacedManifest = Kind{Name: "a manifest file of an application", MaxBytes: 3 << 20, YAML: true, MaxDocuments: 1000,
		Why: "the API server takes objects of at most 1.5 MiB; twice that in one file is more than an application places"}
	// AgeKey is an age key file: a few lines.
	AgeKey = Kind{Name: "an age key file", MaxBytes: 64 << 10,
		Why: "an age key file is a few lines of AGE-SECRET-KEY-1..."}
)

func (k Kind) tooLarge(display string) error {
	return fmt.Errorf("%s: larger than %d KiB: expected %s (%s)", display, k.MaxBytes>>10, k.Name, k.Why)
}

// CheckSize refuses data over the kind's MaxBytes.
func (k Kind) CheckSize(display string, data []byte) error {
	if len(data) > k.MaxBytes {
		return k.tooLarge(display)
	}
	return nil
}

// ReadFile reads a file the user named (a flag, an environment variable): a link is followed, as
// the user gave it, but what it leads to must be a regular file of at most MaxBytes. display
// names it in errors.
func ReadFile(path, display string, k Kind) ([]byte, error) {
	// Non-blocking: opening a FIFO for reading would otherwise wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, display, k)
}

// Links says what a read inside a root does with a symbolic link.
type Links int

const (
	// LinksInside follows a link that stays inside the root and refuses one that leads out.
	LinksInside Links = iota
	// NoLinks refuses every link, as source-controller leaves links out of the artifacts it makes
	// of a repository: the cluster never reads what a link of a tenant's directory leads to.
	NoLinks
)

// ReadIn reads the file rel (a path relative to root) with the bounds of k. A link out of root,
// or any link with NoLinks, is refused; so is anything but a regular file.
func ReadIn(root, rel string, k Kind, links Links) ([]byte, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readIn(r, rel, k, links)
}

func readIn(r *os.Root, rel string, k Kind, links Links) ([]byte, error) {
	display := filepath.ToSlash(rel)
	if links == NoLinks {
		if err := noLinkOn(r, rel, display); err != nil {
			return nil, err
		}
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		// os.Root's error for a link that leads out of it has no value of its own to test.
		if strings.Contains(err.Error(), "path escapes from parent") {
			return nil, fmt.Errorf("%s: a symbolic link out of %s: expected a file inside it", display, r.Name())
		}
		return nil, err
	}
	defer f.Close()
	return read(f, display, k)
}

// noLinkOn refuses rel when it or a directory on its way is a link.
func noLinkOn(r *os.Root, rel, display string) error {
	parts := strings.Split(filepath.Clean(rel), string(filepath.Separator))
	for i := range parts {
		st, err := r.Lstat(filepath.Join(parts[:i+1]...))
		if err != nil {
			return err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return LinkError(display)
		}
	}
	return nil
}

// LinkError is the refusal of a link where Flux would not follow one.
func LinkError(display string) error {
	return fmt.Errorf("%s: a symbolic link: source-controller leaves links out of the repository's artifact, so the cluster never reads what it leads to; expected a regular file", display)
}

// SpecialError is the refusal of a device, FIFO or socket.
func SpecialError(display string, mode fs.FileMode) error {
	return fmt.Errorf("%s: not a regular file (%s): expected a regular file", display, describeMode(mode))
}

func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	default:
		return "mode " + m.String()
	}
}

// read reads an opened file, refusing anything but a regular file, and reading at most one byte
// past MaxBytes whatever its size said (it may grow). The content is not checked: Kind.Check does.
func read(f *os.File, display string, k Kind) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, SpecialError(display, st.Mode())
	}
	if st.Size() > int64(k.MaxBytes) {
		return nil, k.tooLarge(display)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(k.MaxBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", display, err)
	}
	if len(data) > k.MaxBytes {
		return nil, k.tooLarge(display)
	}
	return data, nil
}
