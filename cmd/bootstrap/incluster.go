package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"cluster-init.dev/cluster-init/internal/copyvalues"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/pivot"
	"cluster-init.dev/cluster-init/internal/termtext"
)

// inClusterFlags are the flags of the commands that run in a Job of the bootstrap cluster.
type inClusterFlags struct {
	namespace        string
	kubeconfigSecret string
}

func (f *inClusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the cluster-init release (default: $POD_NAMESPACE)")
	cmd.Flags().StringVar(&f.kubeconfigSecret, "kubeconfig-secret", "", "Secret (key value) with the kubeconfig of the management cluster")
	_ = cmd.MarkFlagRequired("kubeconfig-secret")
}

// connect returns the cluster the Job runs in and the management cluster.
func (f *inClusterFlags) connect(ctx context.Context) (here, management *kube.Cluster, err error) {
	if here, err = f.here(); err != nil {
		return nil, nil, err
	}
	management, err = kube.KubeconfigSecret{Namespace: f.namespace, Name: f.kubeconfigSecret, Key: "value"}.Connect(ctx, here.Client, "management")
	if err != nil {
		return nil, nil, fmt.Errorf("the management cluster: %w", err)
	}
	return here, management, nil
}

// here connects to the cluster the Job runs in.
func (f *inClusterFlags) here() (*kube.Cluster, error) {
	if f.namespace == "" {
		return nil, fmt.Errorf("--namespace is required (or $POD_NAMESPACE)")
	}
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster configuration: %w", err)
	}
	return kube.FromKubeconfig("bootstrap", restToKubeconfig(cfg.Host, cfg.BearerToken, cfg.BearerTokenFile, cfg.CAFile, cfg.CAData))
}

// restToKubeconfig writes the in-cluster credentials as a kubeconfig, the form every client of
// this project (and clusterctl) takes.
func restToKubeconfig(host, token, tokenFile, caFile string, caData []byte) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["in-cluster"] = &clientcmdapi.Cluster{Server: host, CertificateAuthority: caFile, CertificateAuthorityData: caData}
	cfg.AuthInfos["in-cluster"] = &clientcmdapi.AuthInfo{Token: token, TokenFile: tokenFile}
	cfg.Contexts["in-cluster"] = &clientcmdapi.Context{Cluster: "in-cluster", AuthInfo: "in-cluster"}
	cfg.CurrentContext = "in-cluster"
	data, _ := clientcmd.Write(*cfg)
	return data
}

func newCopyValuesCommand() *cobra.Command {
	f := &inClusterFlags{}
	cmd := &cobra.Command{
		Use:    "copy-values",
		Short:  "Copy the environment's values, secrets and source into the management cluster (runs in the management-configs Job)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			here, management, err := f.connect(ctx)
			if err != nil {
				return err
			}
			applied, err := copyvalues.Run(ctx, here, management, f.namespace)
			for _, a := range applied {
				fmt.Fprintln(cmd.OutOrStdout(), termtext.Line(a))
			}
			return err
		},
	}
	f.add(cmd)
	return cmd
}

func newPivotCommand() *cobra.Command {
	f := &inClusterFlags{}
	var clusterName, failOnceAfter string
	cmd := &cobra.Command{
		Use:    "pivot",
		Short:  "Move the cluster definitions into the management cluster (runs in the pivot Job)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Not connect: the kubeconfig Secret moves away during the pivot; the pivot keeps a copy.
			here, err := f.here()
			if err != nil {
				return err
			}
			work, err := os.MkdirTemp("", "pivot-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			out := cmd.OutOrStdout()
			opts := pivot.Options{
				Bootstrap: here,
				Namespace: f.namespace,
				Cluster:   clusterName,
				WorkDir:   work,
				Log: func(format string, a ...any) {
					fmt.Fprintf(out, "%s %s\n", time.Now().Format(time.RFC3339), termtext.Line(fmt.Sprintf(format, a...)))
				},
			}
			if failOnceAfter != "" {
				opts.AfterStep = stopOnceAfter(here, f.namespace, strings.Split(failOnceAfter, ","))
			}
			return pivot.Run(cmd.Context(), opts)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&clusterName, "cluster", "", "the Cluster API cluster to pivot")
	cmd.Flags().StringVar(&failOnceAfter, "fail-once-after", os.Getenv(failOnceAfterEnv), "test hook: exit with an error after each of these steps (comma separated), once each")
	_ = cmd.Flags().MarkHidden("fail-once-after")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

// failOnceAfterEnv is how the end-to-end tests, through a patch of the pivot Job in their values,
// ask the pivot to stop after its steps.
const failOnceAfterEnv = "CLUSTER_INIT_PIVOT_FAIL_ONCE_AFTER"

// stopOnceAfter is the end-to-end tests' hook: it stops the pivot once after each of steps, so
// that the test sees a restarted pivot resume. What it stopped after is remembered in a ConfigMap
// of its own, apart from the pivot's record.
func stopOnceAfter(c *kube.Cluster, namespace string, steps []string) func(context.Context, string) error {
	const name = "cluster-init-pivot-test-stops"
	return func(ctx context.Context, step string) error {
		if !slices.Contains(steps, step) {
			return nil
		}
		cm := &corev1.ConfigMap{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if _, stopped := cm.Data[step]; stopped {
			return nil
		}
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{step: "stopped"}}
			err = c.Client.Create(ctx, cm)
		} else {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[step] = "stopped"
			err = c.Client.Update(ctx, cm)
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("test hook: stopping after step %s", step)
	}
}
