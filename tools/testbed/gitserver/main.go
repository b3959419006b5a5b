// Command gitserver serves the git repositories of a directory over smart HTTP, read and written
// with a user name and a token as a GitLab project is: git's own git-http-backend (CGI) behind
// HTTP basic authentication. It is the test bed's git server, which Flux's source-controller
// clones from in the end-to-end tests; it serves nothing without the credentials.
//
//	gitserver -root /srv/git -listen :3000 -user cluster-init -token-file /etc/gitserver/token
//
// Repositories are bare repositories under root (root/NAME.git), served at /NAME.git; -init NAME
// creates one if it is missing.
//
// Webhooks: every push is announced to the webhooks of root/.hooks/hooks.json, as a GitLab
// project's push webhook announces it (hooks.go): git runs the server's post-receive hook, which
// POSTs one push event per updated ref. The list is read and replaced at /-/hooks (GET, PUT) with
// the same credentials.
package main

import (
	"crypto/subtle"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == deliverCommand {
		// Run by git as the post-receive hook of a push.
		if err := deliver(os.Args[2:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stdout, "webhooks: %v\n", err)
		}
		return
	}
	root := flag.String("root", "/srv/git", "directory of the bare repositories")
	listen := flag.String("listen", ":3000", "address to listen on")
	user := flag.String("user", "cluster-init", "the user name clients authenticate with")
	tokenFile := flag.String("token-file", "/etc/gitserver/token", "file holding the token clients authenticate with")
	backend := flag.String("backend", "/usr/lib/git-core/git-http-backend", "git's smart HTTP CGI program")
	var create multiFlag
	flag.Var(&create, "init", "create this bare repository (NAME or NAME.git) if it is missing (repeatable)")
	flag.Parse()

	token, err := os.ReadFile(*tokenFile)
	if err != nil {
		log.Fatalf("read the token: %v", err)
	}
	secret := strings.TrimSpace(string(token))
	if secret == "" {
		log.Fatalf("%s is empty", *tokenFile)
	}
	for _, name := range create {
		if err := initRepository(*root, name); err != nil {
			log.Fatal(err)
		}
	}
	hooks, err := newHooks(*root)
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	authenticated := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		name, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(name), []byte(*user)) != 1 ||
			subtle.ConstantTimeCompare([]byte(pass), []byte(secret)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			log.Printf("%s %s: 401", r.Method, r.URL.Path)
			return "", false
		}
		return name, true
	}
	mux.HandleFunc("/-/hooks", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := authenticated(w, r); ok {
			hooks.ServeHTTP(w, r)
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		name, ok := authenticated(w, r)
		if !ok {
			return
		}
		// git-http-backend serves pushes to authenticated users (REMOTE_USER set).
		// CGI needs the length of a request: a large push comes chunked, and is read whole first.
		if len(r.TransferEncoding) > 0 {
			body, size, err := spool(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			defer body.Close()
			r.Body, r.ContentLength, r.TransferEncoding = body, size, nil
		}
		env := append([]string{"GIT_PROJECT_ROOT=" + *root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + name}, hooks.GitEnv()...)
		h := &cgi.Handler{Path: *backend, Root: "/", Stderr: os.Stderr, Env: env}
		h.ServeHTTP(w, r)
		log.Printf("%s %s?%s", r.Method, r.URL.Path, r.URL.RawQuery)
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	log.Printf("serving %s on %s", *root, *listen)
	log.Fatal(srv.ListenAndServe())
}

// spool reads a request's body into a temporary file, removed when the returned body is closed.
func spool(r *http.Request) (io.ReadCloser, int64, error) {
	f, err := os.CreateTemp("", "push-")
	if err != nil {
		return nil, 0, err
	}
	os.Remove(f.Name()) // gone once closed
	size, err := io.Copy(f, r.Body)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("read the request: %w", err)
	}
	return f, size, nil
}

func initRepository(root, name string) error {
	if !strings.HasSuffix(name, ".git") {
		name += ".git"
	}
	dir := filepath.Join(root, filepath.Clean("/"+name))
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return nil
	}
	out, err := exec.Command("git", "init", "--bare", "--initial-branch=main", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("create repository %s: %v: %s", name, err, out)
	}
	log.Printf("created repository %s", name)
	return nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
