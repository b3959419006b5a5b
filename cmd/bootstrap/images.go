package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/images"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/termtext"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/values"
)

func newImagesCommand(g *globals) *cobra.Command {
	var output string
	var valueFiles []string
	cmd := &cobra.Command{
		Use:   "images ENV",
		Short: "List every container image the environment makes clusters pull",
		Long: `List every container image the environment makes clusters pull, in all the contexts it runs
in: the images of every pod template, the kind node image of the bootstrap cluster and the node
image of CAPD machines.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := g.openWithValues(args[0], valueFiles)
			if err != nil {
				return err
			}
			r, err := w.Renderer()
			if err != nil {
				return err
			}
			defer r.Close()
			var objs []*unstructured.Unstructured
			var uses []images.Use
			for _, t := range validate.Targets() {
				opts := w.RenderOptions(t.Context)
				opts.State = t.State
				res, err := r.Render(cmd.Context(), opts)
				if err != nil {
					return err
				}
				for _, o := range res.Objects {
					objs = append(objs, o.Object)
				}
				uses = addNodeImages(uses, t.Context, res.Settings)
			}
			for _, u := range images.FromObjects(objs) {
				for _, user := range u.Users {
					uses = images.Add(uses, u.Image, user)
				}
			}
			for _, u := range uses {
				if output == "wide" {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", termtext.Line(u.Image), termtext.Line(strings.Join(u.Users, ", ")))
				} else {
					fmt.Fprintln(cmd.OutOrStdout(), termtext.Line(u.Image))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "wide: also print what uses each image")
	addValuesFlag(cmd, &valueFiles)
	return cmd
}

// addNodeImages adds the images machines are made of, which no pod template names.
func addNodeImages(uses []images.Use, context string, v values.Settings) []images.Use {
	if context == render.ContextBootstrap && v.BootstrapCluster.NodeImage != "" {
		uses = images.Add(uses, v.BootstrapCluster.NodeImage, "kind bootstrap cluster nodes")
	}
	if v.Cluster.OnDocker() && v.Cluster.KubernetesVersion != "" {
		uses = images.Add(uses, v.Cluster.CAPDNodeImage(), "CAPD machines")
	}
	return uses
}
