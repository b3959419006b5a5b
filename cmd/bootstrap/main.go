// Command bootstrap is the cluster-init CLI: it renders and validates environments offline, and
// bootstraps a self-managed Cluster API management cluster from them.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"cluster-init.dev/cluster-init/internal/termtext"
)

func main() {
	// Libraries (controller-runtime, clusterctl) log through controller-runtime's logger; the CLI
	// reports what happens itself.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		printError(os.Stderr, err)
		os.Exit(1)
	}
}

// printError prints the error a command ended with. It may quote what a cluster or a file holds
// (an API server's refusal quoting a tenant's value, a controller's message in a conclusion):
// every line is escaped, and the lines after the first are indented under it, so that no line
// the data starts reads as a line of the tool's own.
func printError(w io.Writer, err error) {
	fmt.Fprintln(w, "error:", termtext.Block(err.Error(), "  "))
}
