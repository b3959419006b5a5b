package backupjob

import (
	"context"
	"fmt"
	"io"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/termtext"
)

// FluxEvents notifies through Flux's event recorder: a Kubernetes Event on the backup unit's
// Kustomization (kubectl describe shows it) and the same event posted to notification-controller,
// whose Alert of the platform sends the errors on (notifications.alerts).
type FluxEvents struct {
	recorder    *events.Recorder
	broadcaster record.EventBroadcaster
	unit        *kustomizev1.Kustomization
	log         io.Writer
}

// NewFluxEvents reports on the Kustomization unit of namespace, posting to address (Flux's
// events endpoint; empty: Kubernetes Events only). Close flushes what is queued.
func NewFluxEvents(c *kube.Cluster, namespace, unit, address string, log io.Writer) (*FluxEvents, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("events of the backup: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := kustomizev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(namespace)})
	r, err := events.NewRecorderForScheme(scheme, b.NewRecorder(scheme, corev1.EventSource{Component: "cluster-init-backup"}),
		logr.Discard(), address, "cluster-init-backup")
	if err != nil {
		return nil, fmt.Errorf("events of the backup: %w", err)
	}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: unit}}
	ks.SetGroupVersionKind(kustomizev1.GroupVersion.WithKind(kustomizev1.KustomizationKind))
	return &FluxEvents{recorder: r, broadcaster: b, unit: ks, log: log}, nil
}

// Notify records one event; severity is "error" or "info".
func (f *FluxEvents) Notify(_ context.Context, severity, reason, message string) {
	typ := corev1.EventTypeNormal
	if severity == "error" {
		typ = corev1.EventTypeWarning
	}
	fmt.Fprintln(f.log, termtext.Line(fmt.Sprintf("event %s: %s", reason, message)))
	f.recorder.AnnotatedEventf(f.unit, nil, typ, reason, "%s", message)
}

// Close sends the Kubernetes Events still queued.
func (f *FluxEvents) Close() { f.broadcaster.Shutdown() }
