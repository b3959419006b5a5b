// Package environment loads an environment-values directory: its kustomization is built with
// kustomize (as Flux would), giving the ConfigMap of the environment values and the Secret of its
// secrets that the cluster-init HelmRelease reads, and their content as values layers that
// remember their source file.
package environment

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"k8s.io/apimachinery/pkg/util/validation"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/checkout"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/secrets"
	"cluster-init.dev/cluster-init/internal/values"
)

const (
	// CredentialKey is the only key of an environment's secrets file.
	CredentialKey = "credentials"
	// Dir is where environments live in the repository.
	Dir = "environment-values"
)

// Environment is a built environment-values directory.
type Environment struct {
	// Name is the environment's path below environment-values/ (or the directory given).
	Name string
	// Dir is the absolute directory.
	Dir string
	// Values and Secrets are the objects to apply; Secrets holds secret data.
	Values  *unstructured.Unstructured
	Secrets *unstructured.Unstructured
	// Layers: the environment values, then the secrets.
	Layers []values.Layer
	// Encrypted: the secrets file is encrypted with SOPS (age); Key decrypted it.
	Encrypted bool
	Key       *secrets.Key
}

// ClusterName is the name the environment is known by in its clusters (the value environment,
// which its backups are named after and a restore checks): its directory's name, when that is a
// DNS label; "" otherwise.
func (e *Environment) ClusterName() string {
	name := filepath.Base(e.Name)
	if len(validation.IsDNS1123Label(name)) != 0 {
		return ""
	}
	return name
}

// GitCredentials are the credentials of the git source (credentials.git.username and .password of
// the secrets file), empty when it has none.
func (e *Environment) GitCredentials() (username, password string) {
	for _, l := range e.Layers {
		if !l.Secret {
			continue
		}
		creds, _ := l.Data[CredentialKey].(map[string]any)
		git, _ := creds["git"].(map[string]any)
		username, _ = git["username"].(string)
		password, _ = git["password"].(string)
	}
	return username, password
}

// SecretValues are what must never appear in output: every leaf of the secrets file and of a
// credentials key in any layer (the environment's, then extra ones such as --values files), but
// the user names that go with them, and every value of any layer that carries a password in a
// URL (a proxy as http://user:password@host), whole and the password alone. The age key is added
// when there is one.
func (e *Environment) SecretValues(extra ...values.Layer) []string {
	var out []string
	var walk func(v any, secret bool, key string)
	walk = func(v any, secret bool, key string) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				walk(x, secret || k == CredentialKey, k)
			}
		case []any:
			for _, x := range t {
				walk(x, secret, key)
			}
		case string:
			if secret && !userNames[key] {
				out = append(out, t)
			}
			for _, m := range urlPassword.FindAllStringSubmatch(t, -1) {
				out = append(out, t, m[1])
				if p, err := url.PathUnescape(m[1]); err == nil {
					out = append(out, p)
				}
			}
		}
	}
	for _, l := range append(append([]values.Layer{}, e.Layers...), extra...) {
		walk(l.Data, l.Secret, "")
	}
	if e.Key != nil {
		out = append(out, string(e.Key.Data()))
	}
	return out
}

// userNames are the keys of credentials that name who authenticates, not what proves it: a git
// user name is often also a word of the output (the test bed's is "cluster-init", the namespace),
// and hiding it would hide that word everywhere without protecting anything.
var userNames = map[string]bool{"username": true, "user": true}

// urlPassword finds the password of a URL's user information (scheme://user:password@host), a
// password with an unencoded / ? # too (up to the last @ before a space): what a URL parser would
// take for a host, a port or a path is still hidden.
var urlPassword = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:([^\s@]+)@`)

// Resolve finds an environment by name (a directory of environment-values/) or by the path of
// its directory. Anything else is refused, naming the environments there are: a file, even one of
// an environment, would otherwise stand for the whole environment without saying so, and a
// directory without a kustomization is no environment.
func Resolve(repoRoot, nameOrPath string) (name, dir string, err error) {
	known, _ := List(repoRoot)
	environments := fmt.Sprintf("(environments: %s)", strings.Join(known, ", "))
	kustomization := konfig.DefaultKustomizationFileName()
	// A path as the shell completes it: from the current directory, or from the checkout; a name
	// first as a name.
	asName, asPath := []string{filepath.Join(repoRoot, Dir, nameOrPath)}, []string{nameOrPath, filepath.Join(repoRoot, nameOrPath)}
	pathLike := filepath.IsAbs(nameOrPath) || strings.HasPrefix(nameOrPath, ".") || strings.ContainsRune(nameOrPath, filepath.Separator)
	candidates := append(asName, asPath...)
	if pathLike {
		candidates = append(asPath, asName...)
	}
	// The first candidate that is an environment wins; if none is, the first one that exists says
	// why it is not (a file, a workload cluster, a directory without a kustomization).
	var refusal error
	for _, c := range candidates {
		st, err := os.Stat(c)
		if err != nil {
			continue
		}
		if problem := notAnEnvironment(nameOrPath, c, st.IsDir(), kustomization, environments); problem != nil {
			if refusal == nil {
				refusal = problem
			}
			continue
		}
		abs, err := filepath.Abs(c)
		if err != nil {
			return "", "", err
		}
		base := filepath.Join(repoRoot, Dir)
		if rel, err := filepath.Rel(base, abs); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel), abs, nil
		}
		return abs, abs, nil
	}
	switch {
	case refusal != nil:
		return "", "", refusal
	case pathLike:
		return "", "", fmt.Errorf("environment %q: no such directory %s", nameOrPath, environments)
	default:
		return "", "", fmt.Errorf("environment %q: no directory %s %s", nameOrPath, filepath.Join(Dir, nameOrPath), environments)
	}
}

// notAnEnvironment says why the path c, given as arg, is not an environment's directory, or nil.
func notAnEnvironment(arg, c string, isDir bool, kustomization, environments string) error {
	if !isDir {
		parent := filepath.Dir(c)
		if workloadCluster(parent) {
			return workloadClusterError(arg)
		}
		if _, err := os.Stat(filepath.Join(parent, kustomization)); err == nil {
			return fmt.Errorf("%s is a file: expected the directory of an environment, %s, or its name %s", arg, filepath.Dir(filepath.Clean(arg)), environments)
		}
		return fmt.Errorf("%s is a file: expected the directory of an environment or its name %s", arg, environments)
	}
	if workloadCluster(c) {
		return workloadClusterError(arg)
	}
	if _, err := os.Stat(filepath.Join(c, kustomization)); err != nil {
		return fmt.Errorf("%s is not an environment: it has no %s with the environment's values and secrets %s", arg, kustomization, environments)
	}
	return nil
}

func workloadClusterError(nameOrPath string) error {
	return fmt.Errorf("%s is a workload cluster (a HelmRelease of the workload-clusters chart), not an environment: commit it under clusters/MANAGEMENT/workload-clusters/NAME/, where `bootstrap validate ENV` of the management environment (with a git source) checks it as the management cluster will", nameOrPath)
}

// workloadCluster tells whether dir holds a workload cluster's definition rather than an
// environment: YAML files of HelmReleases, no kustomization with the environment's generators.
func workloadCluster(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, konfig.DefaultKustomizationFileName())); err == nil {
		return false
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		data, err := boundedfile.ReadIn(dir, filepath.Base(f), boundedfile.Manifest, boundedfile.NoLinks)
		if err != nil || boundedfile.CheckManifest(f, data) != nil {
			continue
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if yaml.Unmarshal(data, &head) == nil && head.Kind == "HelmRelease" {
			return true
		}
	}
	return false
}

// List returns the environments of the repository (directories with a kustomization.yaml).
func List(repoRoot string) ([]string, error) {
	base := filepath.Join(repoRoot, Dir)
	var out []string
	err := filepath.WalkDir(base, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == konfig.DefaultKustomizationFileName() {
			rel, _ := filepath.Rel(base, filepath.Dir(path))
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// Load builds the environment in dir. display turns a path into what messages show (usually
// relative to the repository). key decrypts a secrets file encrypted with SOPS, as Flux's
// kustomize-controller does before it builds the environment; it may be nil when the secrets
// file is not encrypted. Its stages: the files read within their bounds into a copy, kustomize's
// build of the copy, its two objects, and the values and secrets layers.
func Load(name, dir string, display func(string) string, key *secrets.Key) (*Environment, error) {
	kfile := filepath.Join(dir, konfig.DefaultKustomizationFileName())
	if abs, err := filepath.Abs(kfile); err == nil {
		kfile = abs
	}
	copied, err := os.MkdirTemp("", "cluster-init-environment-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(copied)
	in := checkedCopy{root: fileRoot(filepath.Dir(kfile)), copied: copied, display: display}
	sources, err := in.copyKustomization(kfile)
	if err != nil {
		return nil, err
	}
	objs, err := in.build(kfile)
	if err != nil {
		return nil, err
	}
	env := &Environment{Name: name, Dir: dir}
	if err := env.pick(objs, display(kfile)); err != nil {
		return nil, err
	}
	valuesFile := display(sourceFile(dir, sources, names.ValuesConfigMap, names.ValuesKey))
	secretsFile := display(sourceFile(dir, sources, names.SecretsSecret, names.SecretsKey))
	if err := env.parseLayers(display(kfile), valuesFile, secretsFile, key); err != nil {
		return nil, err
	}
	return env, nil
}

// checkedCopy is the copy of an environment's files that kustomize builds: the files it reads are
// the ones checked here, each read once, within its bounds.
type checkedCopy struct {
	root, copied string
	display      func(string) string
}

// read reads a file of the checkout within the bounds of its kind.
func (c checkedCopy) read(path string, k boundedfile.Kind) ([]byte, error) {
	rel, err := filepath.Rel(c.root, path)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%s: outside %s: expected a file of the checkout", c.display(path), c.root)
	}
	data, err := boundedfile.ReadIn(c.root, rel, k, boundedfile.LinksInside)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", c.display(path), trimPathPrefix(err, rel))
	}
	return data, err
}

func (c checkedCopy) copyOf(path string) string {
	rel, _ := filepath.Rel(c.root, path)
	return filepath.Join(c.copied, rel)
}

// copyKustomization copies the kustomization file and its generators' files, and returns the
// generators' files. They are checked before kustomize reads them: a file too large for a
// ConfigMap, or one kustomize would turn into binaryData, is named as itself.
func (c checkedCopy) copyKustomization(kfile string) (map[string]string, error) {
	kdata, err := c.read(kfile, boundedfile.Manifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: missing: an environment is a kustomization with a configMapGenerator %s (file %s) and a secretGenerator %s (file %s)",
			c.display(kfile), names.ValuesConfigMap, names.ValuesKey, names.SecretsSecret, names.SecretsKey)
	}
	if err != nil {
		return nil, err
	}
	if err := boundedfile.Manifest.Check(c.display(kfile), kdata); err != nil {
		return nil, err
	}
	if err := writeCopy(c.copyOf(kfile), kdata); err != nil {
		return nil, err
	}
	sources := generatorFiles(kdata)
	for _, rel := range slices.Sorted(maps.Values(sources)) {
		path := rel
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(kfile), rel)
		}
		data, err := c.read(path, boundedfile.Values)
		if errors.Is(err, fs.ErrNotExist) {
			continue // kustomize names it
		}
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(data) {
			if _, err := values.ParseLayer(c.display(path), data, false); err != nil {
				return nil, err
			}
		}
		// Before SOPS parses an encrypted file, which expands its aliases.
		if err := boundedfile.Values.Check(c.display(path), data); err != nil {
			return nil, err
		}
		if err := writeCopy(c.copyOf(path), data); err != nil {
			return nil, err
		}
	}
	return sources, nil
}

// build runs kustomize on the copy of the kustomization kfile. Files of a generator may live
// outside the environment (shared values), as Flux allows.
func (c checkedCopy) build(kfile string) ([]*unstructured.Unstructured, error) {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustypes.LoadRestrictionsNone
	resMap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Dir(c.copyOf(kfile)))
	if err != nil {
		return nil, fmt.Errorf("%s: kustomize build: %s", c.display(kfile), strings.ReplaceAll(err.Error(), c.copied, c.root))
	}
	data, err := resMap.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("%s: kustomize build: %w", c.display(kfile), err)
	}
	objs, err := utils.ReadObjects(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: kustomize build: %w", c.display(kfile), err)
	}
	return objs, nil
}

// pick takes the values ConfigMap and the secrets Secret from what the kustomization built (shown
// as kfile), and nothing else, into the release's namespace with its labels.
func (env *Environment) pick(objs []*unstructured.Unstructured, kfile string) error {
	for _, o := range objs {
		switch {
		case o.GetKind() == "ConfigMap" && o.GetName() == names.ValuesConfigMap:
			env.Values = o
		case o.GetKind() == "Secret" && o.GetName() == names.SecretsSecret:
			env.Secrets = o
		default:
			return fmt.Errorf("%s: builds %s %s, expected only the ConfigMap %s and the Secret %s",
				kfile, o.GetKind(), o.GetName(), names.ValuesConfigMap, names.SecretsSecret)
		}
	}
	if env.Values == nil {
		return fmt.Errorf("%s: no configMapGenerator named %s (with the file %s)", kfile, names.ValuesConfigMap, names.ValuesKey)
	}
	if env.Secrets == nil {
		return fmt.Errorf("%s: no secretGenerator named %s (with the file %s)", kfile, names.SecretsSecret, names.SecretsKey)
	}
	for _, o := range []*unstructured.Unstructured{env.Values, env.Secrets} {
		if ns := o.GetNamespace(); ns != "" && ns != names.Namespace {
			return fmt.Errorf("%s: %s %s is in namespace %q, expected %s", kfile, o.GetKind(), o.GetName(), ns, names.Namespace)
		}
		o.SetNamespace(names.Namespace)
		// helm-controller upgrades the release when a watched valuesFrom object changes.
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, names.Labels(true))
		o.SetLabels(labels)
	}
	return nil
}

// parseLayers reads the values and the secrets (decrypted with key when SOPS encrypted them) as
// the environment's two layers, kept apart.
func (env *Environment) parseLayers(kfile, valuesFile, secretsFile string, key *secrets.Key) error {
	valuesText, ok, _ := unstructured.NestedString(env.Values.Object, "data", names.ValuesKey)
	if !ok {
		return fmt.Errorf("%s: ConfigMap %s has no key %s", kfile, names.ValuesConfigMap, names.ValuesKey)
	}
	secretsB64, ok, _ := unstructured.NestedString(env.Secrets.Object, "data", names.SecretsKey)
	if !ok {
		return fmt.Errorf("%s: Secret %s has no key %s", kfile, names.SecretsSecret, names.SecretsKey)
	}
	secretsText, err := base64.StdEncoding.DecodeString(secretsB64)
	if err != nil {
		return fmt.Errorf("%s: Secret %s key %s: %w", kfile, names.SecretsSecret, names.SecretsKey, err)
	}
	if secrets.IsEncrypted(secretsText) {
		if secretsText, err = secrets.Decrypt(secretsFile, secretsText, key); err != nil {
			return err
		}
		env.Encrypted, env.Key = true, key
		// The Secret holds what the clusters decrypt, as kustomize-controller builds it.
		if err := unstructured.SetNestedField(env.Secrets.Object, base64.StdEncoding.EncodeToString(secretsText), "data", names.SecretsKey); err != nil {
			return err
		}
	}
	vl, err := values.ParseLayer(valuesFile, []byte(valuesText), false)
	if err != nil {
		return err
	}
	sl, err := values.ParseLayer(secretsFile, secretsText, true)
	if err != nil {
		return err
	}
	if err := checkSecretSplit(vl, sl); err != nil {
		return err
	}
	env.Layers = []values.Layer{vl, sl}
	return nil
}

// checkSecretSplit keeps secrets and values apart: credentials only in the secrets file (so that
// they are only ever stored in a Secret), and nothing else there.
func checkSecretSplit(vl, sl values.Layer) error {
	if line, ok := vl.Has([]string{CredentialKey}); ok {
		return fmt.Errorf("%s:%d: %s: secret values belong in the secrets file (%s), which is stored as a Secret", vl.File, line, CredentialKey, sl.File)
	}
	var extra []string
	for k := range sl.Data {
		if k != CredentialKey {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		line, _ := sl.Has([]string{extra[0]})
		return fmt.Errorf("%s:%d: %s: only %s belongs in the secrets file; move other keys to %s", sl.File, line, extra[0], CredentialKey, vl.File)
	}
	return nil
}

// generatorFiles maps "generator name/data key" to the file of the environment's own
// kustomization (its content: kdata) that provides it.
func generatorFiles(kdata []byte) map[string]string {
	out := map[string]string{}
	var k kustypes.Kustomization
	if err := yaml.Unmarshal(kdata, &k); err != nil {
		return out
	}
	add := func(name string, files []string) {
		for _, f := range files {
			key, path, found := strings.Cut(f, "=")
			if !found {
				path, key = key, filepath.Base(key)
			}
			out[name+"/"+key] = path
		}
	}
	for _, g := range k.ConfigMapGenerator {
		add(g.Name, g.FileSources)
		add(g.Name, g.EnvSources)
	}
	for _, g := range k.SecretGenerator {
		add(g.Name, g.FileSources)
		add(g.Name, g.EnvSources)
	}
	return out
}

func writeCopy(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// fileRoot is what an environment's files may be read from: the checkout it is in, else its own
// directory. A link out of it is refused: it would make a file of the user's machine the
// environment's values.
func fileRoot(dir string) string {
	if root, err := checkout.Root(dir); err == nil {
		return root
	}
	return dir
}

// trimPathPrefix drops the "openat rel: " of an os.Root error, which the caller names itself.
func trimPathPrefix(err error, rel string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == rel {
		return pe.Err
	}
	return err
}

func sourceFile(dir string, sources map[string]string, name, key string) string {
	if p, ok := sources[name+"/"+key]; ok {
		return filepath.Join(dir, p)
	}
	return filepath.Join(dir, fmt.Sprintf("(%s %s)", name, key))
}
