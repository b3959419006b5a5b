package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"cluster-init.dev/cluster-init/internal/testenv"
)

// server runs this git server on a free port with repository r; it returns its address.
func server(t *testing.T) (addr, token string) {
	t.Helper()
	return testenv.GitServer(t, "r")
}

func setHooks(t *testing.T, addr, token string, list []webhook) int {
	t.Helper()
	body, _ := json.Marshal(list)
	req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/-/hooks", bytes.NewReader(body))
	req.SetBasicAuth("cluster-init", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// push commits a file and pushes it to branch main; it returns the commit and git's output.
func push(t *testing.T, addr, token, content string) (string, string) {
	t.Helper()
	work := t.TempDir()
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", work, "-c", "user.name=t", "-c", "user.email=t@t.invalid"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	remote := "http://cluster-init:" + token + "@" + addr + "/r.git"
	if exec.Command("git", "-C", work, "fetch", "-q", remote, "main").Run() == nil {
		git("reset", "-q", "--soft", "FETCH_HEAD")
	}
	if err := os.WriteFile(filepath.Join(work, "f"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f")
	git("commit", "-q", "-m", content)
	out := git("push", remote, "HEAD:refs/heads/main")
	return git("rev-parse", "HEAD"), out
}

// A push is announced to each webhook as GitLab announces it: a push event for the ref, with
// the webhook's token; a webhook that cannot be reached fails nothing, and none of it shows the
// receiver's path or token.
func TestAPushCallsTheWebhooksAsGitLabDoes(t *testing.T) {
	type call struct {
		header http.Header
		event  pushEvent
	}
	var mu sync.Mutex
	var calls []call
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var ev pushEvent
		_ = json.Unmarshal(data, &ev)
		mu.Lock()
		calls = append(calls, call{r.Header.Clone(), ev})
		mu.Unlock()
	}))
	defer receiver.Close()
	down, _ := net.Listen("tcp", "127.0.0.1:0")
	unreachable := "http://" + down.Addr().String() + "/hook/x"
	down.Close()

	addr, token := server(t)
	if got := setHooks(t, addr, "wrong", nil); got != http.StatusUnauthorized {
		t.Fatalf("hooks set without the credentials: %d", got)
	}
	if got := setHooks(t, addr, token, []webhook{{URL: "ftp://x/y"}}); got != http.StatusBadRequest {
		t.Fatalf("a webhook that is not http(s): %d", got)
	}
	secretPath := "/hook/0f9c2e7b5a"
	if got := setHooks(t, addr, token, []webhook{{URL: unreachable}, {URL: receiver.URL + secretPath, Token: "receiver-token-3b8"}}); got != http.StatusNoContent {
		t.Fatalf("set the webhooks: %d", got)
	}

	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/-/hooks", nil)
	req.SetBasicAuth("cluster-init", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(listed), receiver.URL[len("http://"):]) || strings.Contains(string(listed), secretPath) || strings.Contains(string(listed), "receiver-token-3b8") {
		t.Errorf("the listed webhooks: %s, want their hosts without paths or tokens", listed)
	}

	commit, out := push(t, addr, token, "one")
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 {
		t.Fatalf("%d calls of the receiver, expected 1; git said:\n%s", len(calls), out)
	}
	c := calls[0]
	if c.header.Get("X-Gitlab-Event") != "Push Hook" || c.header.Get("X-Gitlab-Token") != "receiver-token-3b8" {
		t.Errorf("headers %v: expected X-Gitlab-Event Push Hook and the webhook's token", c.header)
	}
	if c.event.ObjectKind != "push" || c.event.Ref != "refs/heads/main" || c.event.After != commit || c.event.Project["name"] != "r" {
		t.Errorf("event %+v: expected a push of refs/heads/main at %s in r", c.event, commit)
	}
	if !strings.Contains(out, "200 OK") || !strings.Contains(out, "connection refused") {
		t.Errorf("the pusher is not told how each delivery went:\n%s", out)
	}
	for _, secret := range []string{secretPath, "receiver-token-3b8", token} {
		if strings.Contains(out, secret) {
			t.Errorf("git's output shows %q:\n%s", secret, out)
		}
	}
}
