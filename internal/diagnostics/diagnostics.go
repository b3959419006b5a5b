// Package diagnostics writes what someone needs to understand a stuck bootstrap into one
// tarball: the conclusion, the Flux and Cluster API objects, workloads, nodes and events of each
// cluster, the logs of the controllers, and the Cluster API tree. Secrets are left out, and any
// secret value of the environment found in a log is replaced.
package diagnostics

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/redact"
	"cluster-init.dev/cluster-init/internal/termtext"
)

// Bundle is a diagnostics tarball being written.
type Bundle struct {
	files    map[string][]byte
	redactor *redact.Redactor
}

// New starts a bundle; what redactor knows is hidden in every file.
func New(redactor *redact.Redactor) *Bundle {
	return &Bundle{files: map[string][]byte{}, redactor: redactor}
}

// Add puts a file into the bundle.
func (b *Bundle) Add(name string, data []byte) {
	b.files[name] = []byte(b.redactor.String(string(data)))
}

// AddText puts a file for people to read into the bundle (the conclusion, the Cluster API tree,
// what could not be read), each line escaped (termtext): it quotes what the clusters hold, and is
// read on a terminal. The objects and the logs are kept as the cluster gave them.
func (b *Bundle) AddText(name, text string) {
	b.Add(name, []byte(strings.Join(termtext.Lines(text), "\n")+"\n"))
}

// coreKinds are the built-in objects worth reading when a bootstrap is stuck.
var coreKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Node"}, {Version: "v1", Kind: "Pod"}, {Version: "v1", Kind: "Event"},
	{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "Namespace"},
	{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "batch", Version: "v1", Kind: "Job"},
}

// logNamespaces are where the controllers of a bootstrap run.
var logNamespaces = []string{"flux-system", "cert-manager", "capi-system", "capi-kubeadm-bootstrap-system",
	"capi-kubeadm-control-plane-system", "capd-system", "capo-system", "orc-system", "rke2-bootstrap-system",
	"rke2-control-plane-system", "cluster-init", "kube-flannel"}

// AddCluster adds the objects, logs and Cluster API tree of one cluster under its name.
func (b *Bundle) AddCluster(ctx context.Context, c *kube.Cluster) error {
	kinds := append([]schema.GroupVersionKind{}, coreKinds...)
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.Client.List(ctx, crds); err != nil {
		return fmt.Errorf("diagnostics of the %s cluster: list CRDs: %w", c.Name, err)
	}
	for _, crd := range crds.Items {
		g := crd.Spec.Group
		if !strings.HasSuffix(g, ".x-k8s.io") && !strings.HasSuffix(g, ".fluxcd.io") && g != "cert-manager.io" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				kinds = append(kinds, schema.GroupVersionKind{Group: g, Version: v.Name, Kind: crd.Spec.Names.Kind})
			}
		}
	}
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.Client.List(ctx, list); err != nil {
			b.AddText(fmt.Sprintf("%s/errors/%s.txt", c.Name, gvk.Kind), err.Error())
			continue
		}
		if len(list.Items) == 0 {
			continue
		}
		var out bytes.Buffer
		for i := range list.Items {
			o := &list.Items[i]
			o.SetManagedFields(nil)
			data, err := yaml.Marshal(o.Object)
			if err != nil {
				// YAML refuses the C1 controls and DEL, which a tenant can write into its
				// objects: such an object is kept as JSON (YAML too), not left out.
				if data, err = json.Marshal(o.Object); err != nil {
					continue
				}
				data = append(termtext.EscapeJSON(data), '\n')
			}
			out.WriteString("---\n")
			out.Write(data)
		}
		group := gvk.Group
		if group == "" {
			group = "core"
		}
		b.Add(fmt.Sprintf("%s/resources/%s.%s.yaml", c.Name, gvk.Kind, group), out.Bytes())
	}
	b.AddText(c.Name+"/cluster-api-tree.txt", clusterTree(ctx, c.Client))
	return b.addLogs(ctx, c)
}

func (b *Bundle) addLogs(ctx context.Context, c *kube.Cluster) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	tail := int64(3000)
	for _, ns := range logNamespaces {
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			continue
		}
		for _, p := range pods.Items {
			for _, ctr := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				req := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: &tail})
				data, err := req.DoRaw(ctx)
				if err != nil {
					data = []byte("could not read the logs: " + err.Error())
				}
				b.Add(fmt.Sprintf("%s/logs/%s/%s/%s.log", c.Name, ns, p.Name, ctr.Name), data)
			}
		}
	}
	return nil
}

// Write writes the bundle as a gzipped tarball (mode 0600) in dir and returns its path.
func (b *Bundle) Write(dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.tar.gz", name, time.Now().UTC().Format("20060102T150405Z")))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(b.files))
	for n := range b.files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		data := b.files[n]
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Size: int64(len(data)), ModTime: time.Now()}); err != nil {
			return "", err
		}
		if _, err := io.Copy(tw, bytes.NewReader(data)); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	return path, f.Close()
}

// Read returns the files of a bundle that Write wrote, by name.
func Read(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", path, err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read bundle %s: %w", path, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read bundle %s: %s: %w", path, h.Name, err)
		}
		files[h.Name] = data
	}
}
