package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// deliverCommand is the argument git's post-receive hook runs the server's binary with.
const deliverCommand = "deliver-push"

// deliveryTimeout bounds one webhook call: a push waits for its hook, and an unreachable
// receiver must not hold it up for long (the clusters' poll still finds the commit).
const deliveryTimeout = 5 * time.Second

// webhook is one receiver of push events, as a GitLab project's webhook: a URL and the secret
// token sent in X-Gitlab-Token.
type webhook struct {
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
}

// hooks keeps the webhook list in dir/hooks.json and git's post-receive hook in dir, which every
// repository uses (core.hooksPath).
type hooks struct {
	dir string
	mu  sync.Mutex
}

func newHooks(root string) (*hooks, error) {
	dir := filepath.Join(root, ".hooks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the hooks directory: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the server's binary for the post-receive hook: %w", err)
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %s %s %s\n", shellQuote(exe), deliverCommand, shellQuote(filepath.Join(dir, "hooks.json")))
	if err := os.WriteFile(filepath.Join(dir, "post-receive"), []byte(script), 0o755); err != nil {
		return nil, fmt.Errorf("write the post-receive hook: %w", err)
	}
	return &hooks{dir: dir}, nil
}

// GitEnv makes git-receive-pack run the server's hooks in every repository.
func (h *hooks) GitEnv() []string {
	return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0=" + h.dir}
}

func (h *hooks) file() string { return filepath.Join(h.dir, "hooks.json") }

// ServeHTTP lists the webhooks (GET: their scheme and host, never their paths, which a receiver
// may derive from its token, nor their tokens) or replaces them (PUT: a JSON list of {url, token}).
func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		list, err := readWebhooks(h.file())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		urls := make([]string, 0, len(list))
		for _, hk := range list {
			urls = append(urls, shownURL(hk.URL))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(urls)
	case http.MethodPut:
		var list []webhook
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&list); err != nil {
			http.Error(w, "expected a JSON list of {\"url\", \"token\"}: "+err.Error(), http.StatusBadRequest)
			return
		}
		for i, hk := range list {
			if u, err := url.Parse(hk.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				http.Error(w, fmt.Sprintf("webhook %d: expected an http or https URL", i), http.StatusBadRequest)
				return
			}
		}
		data, err := json.Marshal(list)
		if err == nil {
			err = writeFileAtomic(h.file(), data)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, PUT")
		http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
	}
}

func readWebhooks(path string) ([]webhook, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []webhook
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return list, nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp) // it holds the webhooks' tokens
		return err
	}
	return nil
}

// pushEvent is the part of GitLab's push event a receiver reads.
type pushEvent struct {
	ObjectKind  string            `json:"object_kind"`
	EventName   string            `json:"event_name"`
	Before      string            `json:"before"`
	After       string            `json:"after"`
	Ref         string            `json:"ref"`
	CheckoutSHA string            `json:"checkout_sha"`
	Project     map[string]string `json:"project"`
}

// deliver is the post-receive hook: for each ref the push updated (git's stdin lines "OLD NEW
// REF"), one push event to each webhook. What happened goes to out, which git shows the pusher
// ("remote: …"), and to the server's log. A failed delivery fails nothing: the push is done.
func deliver(args []string, in io.Reader, out io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: gitserver %s HOOKS_FILE", deliverCommand)
	}
	list, err := readWebhooks(args[0])
	if err != nil || len(list) == 0 {
		return err
	}
	wd, err := os.Getwd() // git runs the hook in the bare repository
	if err != nil {
		return err
	}
	repo := strings.TrimSuffix(filepath.Base(wd), ".git")
	var events []pushEvent
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		kind, name := "push", "push"
		if strings.HasPrefix(f[2], "refs/tags/") {
			kind, name = "tag_push", "tag_push"
		}
		events = append(events, pushEvent{ObjectKind: kind, EventName: name, Before: f[0], After: f[1], Ref: f[2], CheckoutSHA: f[1],
			Project: map[string]string{"name": repo, "path_with_namespace": repo}})
	}
	if err := sc.Err(); err != nil {
		return err
	}
	client := &http.Client{Timeout: deliveryTimeout}
	for _, ev := range events {
		for _, hk := range list {
			line := fmt.Sprintf("webhook %s (%s): %s", shownURL(hk.URL), ev.Ref, call(client, hk, ev))
			fmt.Fprintln(out, line)
			fmt.Fprintln(os.Stderr, line)
		}
	}
	return nil
}

// call posts one event as GitLab does and says how it went.
func call(client *http.Client, hk webhook, ev pushEvent) string {
	body, err := json.Marshal(ev)
	if err != nil {
		return err.Error()
	}
	req, err := http.NewRequest(http.MethodPost, hk.URL, bytes.NewReader(body))
	if err != nil {
		return "invalid URL"
	}
	event := "Push Hook"
	if ev.ObjectKind == "tag_push" {
		event = "Tag Push Hook"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", event)
	if hk.Token != "" {
		req.Header.Set("X-Gitlab-Token", hk.Token)
	}
	start := time.Now()
	resp, err := client.Do(req)
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is shown once, without its path
		}
		return fmt.Sprintf("failed after %s: %v", took, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return fmt.Sprintf("%s in %s", resp.Status, took)
}

// shownURL is a webhook's scheme and host: its path may be derived from a token (Flux's
// receivers' are), so it stays out of logs.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
