package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/localregistry"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/pivot"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/secrets"
	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/values"
)

// publishedSource is where the clusters read the checkout from.
type publishedSource struct {
	// values are the `source` values pointing at it.
	values map[string]any
	// git is the git source (--source git), with its credentials.
	git *source.GitSource
	// pivotStarted: a previous run's pivot has started; the bootstrap cluster is frozen and keeps
	// what was published then.
	pivotStarted bool
}

// planSource decides, before anything is created, what the clusters will reconcile from. A git
// source is known from the values and the checkout (the clusters read the environment from it,
// its secrets encrypted); an OCI source is known once the checkout is pushed (publishSource).
func planSource(ctx context.Context, s *session) (*publishedSource, error) {
	v, err := render.ReleaseValues(s.opts.RepoRoot, s.renderOptions(render.ContextBootstrap, nil))
	if err != nil {
		return nil, fmt.Errorf("environment %s is invalid, nothing was created:\n%w", s.opts.Env.Name, err)
	}
	kind := s.source
	if kind == "" {
		// The environment says where its clusters reconcile from; the checkout pushed next to
		// kind is for quick local runs.
		kind = "oci"
		if v.Settings.Source.Type == "git" && v.Settings.Source.URL != "" {
			kind = "git"
		}
	}
	switch kind {
	case "oci":
		return &publishedSource{}, nil
	case "git":
	default:
		return nil, fmt.Errorf("--source: unknown source %q, expected oci or git", s.source)
	}
	env := s.opts.Env
	rel, err := filepath.Rel(s.opts.RepoRoot, env.Dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("--source git: the clusters read the environment from the repository, but %s is not in the checkout %s", env.Dir, s.opts.RepoRoot)
	}
	if !env.Encrypted {
		return nil, fmt.Errorf("--source git: the clusters read the environment's secrets from git, and %s/%s is not encrypted: encrypt it (bootstrap secrets encrypt %s --age-recipient PUBLIC_KEY) and commit it",
			filepath.ToSlash(rel), names.SecretsKey, env.Name)
	}
	g := source.GitSource{}
	if v.Settings.Source.Type == "git" {
		g.URL, g.Ref = v.Settings.Source.URL, v.Settings.Source.Ref
	}
	if g, err = source.CheckoutGit(ctx, s.opts.RepoRoot, g); err != nil {
		return nil, err
	}
	g.Username, g.Password = env.GitCredentials()
	return &publishedSource{values: g.Values(names.GitAuthSecret, filepath.ToSlash(rel)), git: &g}, nil
}

// publishSource makes the checkout reachable by the clusters: pushed next to kind (oci), or
// checked in the repository the clusters read (git): the credentials work, the ref exists and is
// the checkout's commit, with no uncommitted change to what the clusters read.
func publishSource(ctx context.Context, s *session, bc *bootstrapCluster, v values.Settings, planned *publishedSource) (*publishedSource, error) {
	// Once the pivot has started, the bootstrap cluster is frozen: a new revision would reach units
	// it suspended and the pivot Job; keep what is published.
	if bc.kind != nil {
		st, err := pivot.ReadState(ctx, bc.cluster.Client, names.Namespace)
		if err != nil {
			return nil, err
		}
		if st.Started() {
			vals, err := sourceApplied(ctx, bc)
			if err != nil {
				return nil, err
			}
			s.out.Log("the pivot has started (done: %s): keeping the published source", strings.Join(st.Done, ", "))
			return &publishedSource{values: vals, git: planned.git, pivotStarted: true}, nil
		}
	}
	if planned.git != nil {
		return planned, checkGit(ctx, s, planned)
	}
	reg := localregistry.Registry{
		Name:     v.BootstrapCluster.Registry.Name,
		Image:    v.BootstrapCluster.Registry.Image,
		Network:  "kind",
		HostPort: v.BootstrapCluster.Registry.HostPort,
	}
	if err := reg.Ensure(ctx); err != nil {
		return nil, err
	}
	rev := source.Revision(ctx, s.opts.RepoRoot)
	pub, err := source.PushOCI(ctx, s.renderer.Snapshot(), source.OCITarget{PushAddress: reg.PushAddress(), ClusterAddress: reg.ClusterAddress(), Repository: names.SourceRepository}, rev)
	if err != nil {
		return nil, err
	}
	if rev == "" {
		rev = "not a git checkout"
	}
	s.out.Log("pushed the checkout (%s) to %s/%s as %s, with charts %s", rev, reg.PushAddress(), names.SourceRepository, pub.Tag, strings.Join(pub.Charts, ", "))
	return &publishedSource{values: pub.Values}, nil
}

// checkGit looks at the git repository from this machine, as source-controller will from the
// clusters: what the clusters read must be what was validated here.
func checkGit(ctx context.Context, s *session, src *publishedSource) error {
	g := *src.git
	paths := append(append([]string{}, source.Dirs...), filepath.ToSlash(src.values["environment"].(string)))
	if dirty, err := source.Uncommitted(ctx, s.opts.RepoRoot, paths...); err != nil {
		return err
	} else if dirty != "" {
		return fmt.Errorf("--source git: the clusters read %s, but the checkout has changes that are not committed:\n%s", g, dirty)
	}
	remote, err := g.Remote(ctx)
	if errors.Is(err, source.ErrUnreachable) {
		s.out.Log("%v: the clusters will say whether they reach it", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("--source git: %w", err)
	}
	head, err := source.Head(ctx, s.opts.RepoRoot)
	if err != nil {
		return err
	}
	if remote != head {
		return fmt.Errorf("--source git: the clusters read %s at %.12s, but the checkout is at %.12s: push it (or check out that commit)", g, remote, head)
	}
	s.out.Log("the clusters reconcile from %s, at %.12s (the checkout's commit)", g, remote)
	return nil
}

// sourceApplied reads the source values a previous run applied.
func sourceApplied(ctx context.Context, bc *bootstrapCluster) (map[string]any, error) {
	cm := &corev1.ConfigMap{}
	if err := bc.cluster.Client.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: names.SourceConfigMap}, cm); err != nil {
		return nil, fmt.Errorf("the published source: %w", err)
	}
	var vals struct {
		Source map[string]any `json:"source"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data[names.ValuesKey]), &vals); err != nil {
		return nil, fmt.Errorf("the published source: %w", err)
	}
	return vals.Source, nil
}

// sourceSecrets are the Secrets the clusters need to read a git source: its credentials, and the
// age key that decrypts the environment's secrets. The CLI creates them; the management-configs
// Job copies them; neither is ever in git.
func sourceSecrets(env *environment.Environment, src *publishedSource) ([]*unstructured.Unstructured, error) {
	var out []*corev1.Secret
	if src.git != nil && (src.git.Username != "" || src.git.Password != "") {
		out = append(out, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.GitAuthSecret},
			Data: map[string][]byte{"username": []byte(src.git.Username), "password": []byte(src.git.Password)}})
	}
	if env.Encrypted && env.Key != nil {
		out = append(out, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.AgeKeySecret},
			Data: map[string][]byte{secrets.KeySecretKey: env.Key.Data()}})
	}
	var objs []*unstructured.Unstructured
	for _, sec := range out {
		sec.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
		sec.Namespace, sec.Labels, sec.Type = names.Namespace, names.Labels(false), corev1.SecretTypeOpaque
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sec)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		objs = append(objs, u)
	}
	return objs, nil
}
