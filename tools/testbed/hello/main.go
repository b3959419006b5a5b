// Command hello is the application the placement end-to-end test places on clusters: an HTTP
// server that says which cluster it runs on. With --fail-on naming its own cluster it exits, so
// that a commit can break the application on one cluster only.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	cluster := flag.String("cluster", os.Getenv("CLUSTER_NAME"), "the cluster it runs on")
	failOn := flag.String("fail-on", "", "comma-separated clusters on which it exits at once")
	addr := flag.String("listen", ":8080", "address to serve on")
	flag.Parse()
	if slices.Contains(strings.Split(*failOn, ","), *cluster) {
		log.Fatalf("told to fail on cluster %s", *cluster)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", *cluster)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("serving on %s in cluster %s", *addr, *cluster)
	log.Fatal(srv.ListenAndServe())
}
