// Package backup is the format of a management cluster's backup and the rules around it: what a
// backup holds (Cluster API's objects of each namespace in clusterctl move's directory format,
// certificate authorities and kubeconfig Secrets included, and what the platform keeps beside
// them), its metadata, its archive (a gzipped tar, age-encrypted to the recipients the values
// name: the cluster that writes it never holds what decrypts it), the name it has in the store,
// and which backups retention removes. Reading a backup refuses, naming what is wrong and before
// anything uses it, one of another environment, one of a newer format than this reads, and an
// archive that is truncated, damaged or not encrypted to the key given.
package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"filippo.io/age"
)

// Format is the version of the archive this code writes, and the newest it reads.
const Format = 1

// metaFile is the archive's first file: what the backup is.
const metaFile = "backup.json"

// Bounds of what a backup may hold: reading one never costs more than this, whatever the store
// hands back.
const (
	MaxArchiveBytes = 1 << 30   // the encrypted archive as stored
	MaxContentBytes = 4 << 30   // every file, uncompressed
	MaxFileBytes    = 64 << 20  // one file
	MaxFiles        = 200_000   // files in all
	maxMetaBytes    = 4 << 20   // backup.json
	maxNameLength   = 1024      // a file's path in the archive
	maxRecipients   = 32        // age recipients named in the values
	maxNamespaces   = 10_000    // namespaces in the metadata
	maxClustersList = 1_000_000 // clusters named in the metadata, in all
)

// Meta says what a backup is.
type Meta struct {
	Format int `json:"format"`
	// Environment is the environment whose management cluster was backed up; Cluster is that
	// cluster's name.
	Environment string    `json:"environment"`
	Cluster     string    `json:"cluster"`
	Created     time.Time `json:"created"`
	// Reason is why it was taken: the schedule, before a change of the platform, on demand.
	Reason string `json:"reason"`
	// Version is the cluster-init that wrote it.
	Version    string      `json:"version"`
	Namespaces []Namespace `json:"namespaces"`
}

// Namespace is what a backup holds of one namespace.
type Namespace struct {
	Name string `json:"name"`
	// Management: the namespace of the management cluster's own definitions (not restored into
	// a new management cluster, which has its own; kept to find what the lost one left behind).
	Management bool `json:"management,omitempty"`
	// Clusters are the Cluster API clusters in it; Objects how many objects clusterctl saved.
	Clusters []string `json:"clusters,omitempty"`
	Objects  int      `json:"objects"`
	// Skipped says why the namespace's objects are not in the backup: clusterctl saves a
	// namespace only when every cluster in it is provisioned and not paused, and every machine
	// has its node. The other namespaces are saved all the same.
	Skipped string `json:"skipped,omitempty"`
}

// Reasons a backup is taken.
const (
	ReasonSchedule     = "schedule"
	ReasonBeforeChange = "before-change"
	ReasonOnDemand     = "on-demand"
)

// Contents is a backup in memory: its metadata and its files by path (clusterctl/<namespace>/…,
// platform/…).
type Contents struct {
	Meta  Meta
	Files map[string][]byte
}

// ClusterctlDir is where the objects clusterctl saved of a namespace are in the archive.
func ClusterctlDir(namespace string) string { return "clusterctl/" + namespace }

// Write writes the backup as a gzipped tar encrypted to recipients: backup.json first, then the
// files in path order.
func Write(w io.Writer, c Contents, recipients []age.Recipient) error {
	if len(recipients) == 0 {
		return errors.New("write a backup: no age recipient to encrypt it to")
	}
	if c.Meta.Format == 0 {
		c.Meta.Format = Format
	}
	if err := checkMeta(c.Meta); err != nil {
		return fmt.Errorf("write a backup: %w", err)
	}
	enc, err := age.Encrypt(w, recipients...)
	if err != nil {
		return fmt.Errorf("write a backup: encrypt: %w", err)
	}
	gz := gzip.NewWriter(enc)
	tw := tar.NewWriter(gz)
	meta, err := json.MarshalIndent(c.Meta, "", "  ")
	if err != nil {
		return fmt.Errorf("write a backup: %w", err)
	}
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: c.Meta.Created, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add(metaFile, meta); err != nil {
		return fmt.Errorf("write a backup: %w", err)
	}
	names := make([]string, 0, len(c.Files))
	for name := range c.Files {
		if err := checkName(name); err != nil {
			return fmt.Errorf("write a backup: %w", err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := add(name, c.Files[name]); err != nil {
			return fmt.Errorf("write a backup: %s: %w", name, err)
		}
	}
	for _, closer := range []io.Closer{tw, gz, enc} {
		if err := closer.Close(); err != nil {
			return fmt.Errorf("write a backup: %w", err)
		}
	}
	return nil
}

// Expect is what a backup must be to be read.
type Expect struct {
	// Environment is the environment it must be of.
	Environment string
}

// Refusals of a backup, each wrapped with what is wrong with it.
var (
	ErrUndecryptable = errors.New("not encrypted to the age key given")
	ErrDamaged       = errors.New("truncated or damaged")
	ErrNewerFormat   = errors.New("of a newer format")
	ErrOtherEnv      = errors.New("of another environment")
)

// Read decrypts, checks and reads a backup, within the bounds above. Nothing of it is returned
// unless all of it is whole: age authenticates every chunk and the end of the stream, gzip its
// checksum, tar its entries.
func Read(r io.Reader, identities []age.Identity, want Expect) (Contents, error) {
	limited := &countingReader{r: io.LimitReader(r, MaxArchiveBytes+1)}
	dec, err := age.Decrypt(limited, identities...)
	if err != nil {
		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			return Contents{}, fmt.Errorf("%w: it was encrypted to other recipients", ErrUndecryptable)
		}
		return Contents{}, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	gz, err := gzip.NewReader(dec)
	if err != nil {
		return Contents{}, damaged(limited, err)
	}
	tr := tar.NewReader(gz)
	c := Contents{Files: map[string][]byte{}}
	var total int64
	for i := 0; ; i++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Contents{}, damaged(limited, err)
		}
		if i >= MaxFiles+1 {
			return Contents{}, fmt.Errorf("%w: more than %d files", ErrDamaged, MaxFiles)
		}
		if h.Typeflag != tar.TypeReg {
			return Contents{}, fmt.Errorf("%w: %q is not a regular file", ErrDamaged, h.Name)
		}
		limit := int64(MaxFileBytes)
		if i == 0 {
			limit = maxMetaBytes
		}
		if h.Size > limit || total+h.Size > MaxContentBytes {
			return Contents{}, fmt.Errorf("%w: %s is %d bytes, more than a backup may hold", ErrDamaged, h.Name, h.Size)
		}
		data, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return Contents{}, damaged(limited, err)
		}
		total += int64(len(data))
		if i == 0 {
			if h.Name != metaFile {
				return Contents{}, fmt.Errorf("%w: its first file is %q, not %s", ErrDamaged, h.Name, metaFile)
			}
			if c.Meta, err = readMeta(data, want); err != nil {
				return Contents{}, err
			}
			continue
		}
		if err := checkName(h.Name); err != nil {
			return Contents{}, fmt.Errorf("%w: %v", ErrDamaged, err)
		}
		if _, dup := c.Files[h.Name]; dup {
			return Contents{}, fmt.Errorf("%w: %s twice", ErrDamaged, h.Name)
		}
		c.Files[h.Name] = data
	}
	if c.Meta.Format == 0 {
		return Contents{}, fmt.Errorf("%w: no %s", ErrDamaged, metaFile)
	}
	// The end of age's stream is authenticated: reading to it proves nothing was cut off.
	if _, err := io.Copy(io.Discard, dec); err != nil {
		return Contents{}, damaged(limited, err)
	}
	if limited.n > MaxArchiveBytes {
		return Contents{}, fmt.Errorf("%w: more than %d bytes", ErrDamaged, MaxArchiveBytes)
	}
	return c, nil
}

func damaged(r *countingReader, err error) error {
	if r.n > MaxArchiveBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrDamaged, MaxArchiveBytes)
	}
	return fmt.Errorf("%w: %v", ErrDamaged, err)
}

func readMeta(data []byte, want Expect) (Meta, error) {
	// The format first, alone: a newer format may have changed the rest.
	var head struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Meta{}, fmt.Errorf("%w: %s: %v", ErrDamaged, metaFile, err)
	}
	if head.Format > Format {
		return Meta{}, fmt.Errorf("%w: format %d, this cluster-init reads formats up to %d: restore it with the cluster-init that wrote it, or a newer one", ErrNewerFormat, head.Format, Format)
	}
	var m Meta
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Meta{}, fmt.Errorf("%w: %s: %v", ErrDamaged, metaFile, err)
	}
	if err := checkMeta(m); err != nil {
		return Meta{}, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	if want.Environment != "" && m.Environment != want.Environment {
		return Meta{}, fmt.Errorf("%w: it is a backup of environment %q (cluster %s), not %q", ErrOtherEnv, m.Environment, m.Cluster, want.Environment)
	}
	return m, nil
}

func checkMeta(m Meta) error {
	switch {
	case m.Format < 1:
		return fmt.Errorf("format %d: expected 1 or more", m.Format)
	case m.Environment == "" || m.Cluster == "":
		return errors.New("no environment or cluster named")
	case m.Created.IsZero():
		return errors.New("no creation time")
	case len(m.Namespaces) > maxNamespaces:
		return fmt.Errorf("%d namespaces, more than %d", len(m.Namespaces), maxNamespaces)
	}
	clusters := 0
	for _, ns := range m.Namespaces {
		clusters += len(ns.Clusters)
	}
	if clusters > maxClustersList {
		return fmt.Errorf("%d clusters, more than %d", clusters, maxClustersList)
	}
	return nil
}

// checkName refuses a path that is not a plain relative path under clusterctl/ or platform/.
func checkName(name string) error {
	clean := path.Clean(name)
	if len(name) > maxNameLength || clean != name || path.IsAbs(name) || strings.HasPrefix(clean, "../") || clean == ".." ||
		!(strings.HasPrefix(name, "clusterctl/") || strings.HasPrefix(name, "platform/")) || strings.ContainsAny(name, "\\\x00") {
		return fmt.Errorf("file name %q: expected a relative path under clusterctl/ or platform/", name)
	}
	return nil
}

// Namespaces are the namespaces the backup holds clusterctl's objects of, the management
// cluster's own left out unless management is set.
func (c Contents) Namespaces(management bool) []Namespace {
	var out []Namespace
	for _, ns := range c.Meta.Namespaces {
		if !ns.Management || management {
			out = append(out, ns)
		}
	}
	return out
}

// FilesIn are the files of the backup under dir, by their name in it.
func (c Contents) FilesIn(dir string) map[string][]byte {
	out := map[string][]byte{}
	for name, data := range c.Files {
		if rest, ok := strings.CutPrefix(name, dir+"/"); ok && !strings.Contains(rest, "/") {
			out[rest] = data
		}
	}
	return out
}

// ParseRecipients reads the age recipients the values name (public keys, age1…).
func ParseRecipients(keys []string) ([]age.Recipient, error) {
	if len(keys) == 0 {
		return nil, errors.New("backup.recipients: expected at least one age public key (age1…)")
	}
	if len(keys) > maxRecipients {
		return nil, fmt.Errorf("backup.recipients: %d keys, at most %d", len(keys), maxRecipients)
	}
	var out []age.Recipient
	for i, k := range keys {
		r, err := age.ParseX25519Recipient(strings.TrimSpace(k))
		if err != nil {
			return nil, fmt.Errorf("backup.recipients[%d]: not an age public key (expected age1…)", i)
		}
		out = append(out, r)
	}
	return slices.Clip(out), nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
