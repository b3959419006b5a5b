// Package revisions says which commit a Flux object of a cluster runs: the revision its
// controller last applied, and the one its source has fetched since. While they differ, the
// object is behind its branch (a commit is on its way, or stopped by an error).
package revisions

import (
	"context"
	"fmt"
	"strings"
	"sync"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Revision is what a Flux object runs, in Flux's revision format ("main@sha1:0123…",
// "latest@sha256:…").
type Revision struct {
	// Applied is the revision last applied; "" when none was.
	Applied string `json:"applied,omitempty"`
	// Source is the revision the object's source fetched last; "" when unknown.
	Source string `json:"source,omitempty"`
	// Unread says why the source could not be read (no right to read it): whether the object is
	// behind is not known.
	Unread string `json:"unread,omitempty"`
}

// Behind tells whether the source has a revision the object has not applied.
func (r Revision) Behind() bool { return r.Source != "" && r.Applied != r.Source }

// String is the revision in short ("main@0123abc"), and what it is behind.
func (r Revision) String() string {
	switch {
	case r.Unread != "" && r.Applied == "":
		return "none applied yet (its source: " + r.Unread + ")"
	case r.Unread != "":
		return Short(r.Applied) + " (its source: " + r.Unread + ")"
	case r.Applied == "" && r.Source == "":
		return ""
	case r.Applied == "":
		return "none applied yet, " + Short(r.Source) + " fetched"
	case r.Behind():
		return Short(r.Applied) + ", behind " + Short(r.Source)
	default:
		return Short(r.Applied)
	}
}

// Short cuts a Flux revision's digest to 7 characters: "main@sha1:0123456789…" -> "main@0123456".
func Short(rev string) string {
	ref, digest, ok := strings.Cut(rev, "@")
	if !ok {
		// A bare digest ("sha1:…") or a chart version.
		ref, digest = "", rev
	}
	if _, hex, ok := strings.Cut(digest, ":"); ok {
		digest = hex
	}
	if len(digest) > 7 {
		digest = digest[:7]
	}
	if ref == "" {
		return digest
	}
	return ref + "@" + digest
}

// Reader reads revisions, each source once.
type Reader struct {
	c client.Reader
	// mu guards sources: the parts of one look read side by side.
	mu      sync.Mutex
	sources map[client.ObjectKey]map[string]string // by key, then kind
}

// NewReader reads from c.
func NewReader(c client.Reader) *Reader {
	return &Reader{c: c, sources: map[client.ObjectKey]map[string]string{}}
}

// sourceVersions are the API versions of the sources a Kustomization may name.
var sourceVersions = map[string]schema.GroupVersion{
	"GitRepository": {Group: "source.toolkit.fluxcd.io", Version: "v1"},
	"OCIRepository": {Group: "source.toolkit.fluxcd.io", Version: "v1"},
	"Bucket":        {Group: "source.toolkit.fluxcd.io", Version: "v1"},
	// A tenant's directory as the platform's gate checked it (internal/tenantsources).
	"ExternalArtifact": {Group: "source.toolkit.fluxcd.io", Version: "v1"},
}

// Of is the revision of a Kustomization: the one it last applied, the one its source fetched. A
// source that cannot be read is said in the revision, not an error: the rest of a look stands.
func (r *Reader) Of(ctx context.Context, ks *kustomizev1.Kustomization) Revision {
	rev := Revision{Applied: ks.Status.LastAppliedRevision}
	ref := ks.Spec.SourceRef
	ns := ref.Namespace
	if ns == "" {
		ns = ks.Namespace
	}
	src, err := r.source(ctx, ref.Kind, client.ObjectKey{Namespace: ns, Name: ref.Name})
	if err != nil {
		rev.Unread = err.Error()
		return rev
	}
	rev.Source = src
	return rev
}

// source is the revision of the artifact a source fetched last; "" for a source that has none
// yet, is gone, or is of a kind this does not know.
func (r *Reader) source(ctx context.Context, kind string, key client.ObjectKey) (string, error) {
	// Held across the read: the parts of a look share few sources, each is read once.
	r.mu.Lock()
	defer r.mu.Unlock()
	if byKind, ok := r.sources[key]; ok {
		if rev, ok := byKind[kind]; ok {
			return rev, nil
		}
	}
	gv, ok := sourceVersions[kind]
	if !ok {
		return "", nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gv.WithKind(kind))
	rev := ""
	switch err := r.c.Get(ctx, key, obj); {
	case err == nil:
		rev, _, _ = unstructured.NestedString(obj.Object, "status", "artifact", "revision")
	case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
	default:
		return "", fmt.Errorf("read %s %s: %w", kind, key, err)
	}
	if r.sources[key] == nil {
		r.sources[key] = map[string]string{}
	}
	r.sources[key][kind] = rev
	return rev, nil
}
