package backupjob

import (
	"context"
	"fmt"
	"io"
	"os"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/termtext"
)

const reportingController = "cluster-init-backup"

// FluxEvents notifies as Flux's controllers do: the event posted to notification-controller
// (Flux's event recorder), whose Alert of the platform sends the errors on
// (notifications.alerts), and a Kubernetes Event on the backup unit's Kustomization (kubectl
// describe shows it), written before Notify returns: a Job ends right after.
type FluxEvents struct {
	recorder *events.Recorder
	client   client.Client
	unit     *kustomizev1.Kustomization
	log      io.Writer
}

// NewFluxEvents reports on the Kustomization unit of namespace, posting to address (Flux's
// events endpoint; empty: Kubernetes Events only). What cannot be sent is said in log.
func NewFluxEvents(c *kube.Cluster, namespace, unit, address string, log io.Writer) (*FluxEvents, error) {
	scheme := runtime.NewScheme()
	if err := kustomizev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// Not logr.Discard(): the recorder asks its logger's sink, which Discard has none of.
	logger := funcr.New(func(prefix, args string) { fmt.Fprintln(log, termtext.Line(prefix+" "+args)) }, funcr.Options{})
	// The Kubernetes Event is written here, synchronously: the recorder's own goes through an
	// asynchronous broadcaster that a Job's exit would cut short.
	r, err := events.NewRecorderForScheme(scheme, &record.FakeRecorder{}, logger, address, reportingController)
	if err != nil {
		return nil, fmt.Errorf("events of the backup: %w", err)
	}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: unit}}
	ks.SetGroupVersionKind(kustomizev1.GroupVersion.WithKind(kustomizev1.KustomizationKind))
	return &FluxEvents{recorder: r, client: c.Client, unit: ks, log: log}, nil
}

// Notify records one event; severity is "error" or "info".
func (f *FluxEvents) Notify(ctx context.Context, severity, reason, message string) {
	typ := corev1.EventTypeNormal
	if severity == "error" {
		typ = corev1.EventTypeWarning
	}
	fmt.Fprintln(f.log, termtext.Line(fmt.Sprintf("event %s: %s", reason, message)))
	f.recorder.AnnotatedEventf(f.unit, nil, typ, reason, "%s", message)
	now := metav1.Now()
	host, _ := os.Hostname()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.unit.Namespace, GenerateName: f.unit.Name + "."},
		InvolvedObject: corev1.ObjectReference{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind,
			Namespace: f.unit.Namespace, Name: f.unit.Name},
		Reason: reason, Message: message, Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: reportingController}, ReportingController: reportingController, ReportingInstance: host,
	}
	if err := f.client.Create(ctx, ev); err != nil {
		fmt.Fprintln(f.log, termtext.Line(fmt.Sprintf("could not record the event %s on Kustomization %s/%s: %v", reason, f.unit.Namespace, f.unit.Name, err)))
	}
}
