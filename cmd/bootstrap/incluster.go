package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
	return kube.InCluster("bootstrap")
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
				opts.AfterStep = pivot.StopOnceAfter(here.Client, f.namespace, strings.Split(failOnceAfter, ","))
			}
			return pivot.Run(cmd.Context(), opts)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&clusterName, "cluster", "", "the Cluster API cluster to pivot")
	cmd.Flags().StringVar(&failOnceAfter, "fail-once-after", os.Getenv(pivot.FailOnceAfterEnv), "test hook: exit with an error after each of these steps (comma separated), once each")
	_ = cmd.Flags().MarkHidden("fail-once-after")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}
