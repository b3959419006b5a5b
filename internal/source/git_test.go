package source_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// gitServer runs the test bed's git server (git's git-http-backend behind basic authentication)
// on a free port, with one repository holding branch main.
func gitServer(t *testing.T) (url, token, commit string) {
	t.Helper()
	addr, token := testenv.GitServer(t, "r")
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", work, "-c", "user.name=t", "-c", "user.email=t@t.invalid"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f")
	git("commit", "-q", "-m", "c")
	url = "http://" + addr + "/r.git"
	git("push", "-q", "http://cluster-init:"+token+"@"+addr+"/r.git", "HEAD:refs/heads/main")
	return url, token, git("rev-parse", "HEAD")
}

// The CLI looks at the git source as source-controller will, and says what is wrong without
// printing the token.
func TestGitRemote(t *testing.T) {
	url, token, commit := gitServer(t)
	ctx := t.Context()
	good := source.GitSource{URL: url, Ref: map[string]string{"branch": "main"}, Username: "cluster-init", Password: token}
	if got, err := good.Remote(ctx); err != nil || got != commit {
		t.Fatalf("remote: %q %v, want %s", got, err, commit)
	}
	for _, c := range []struct {
		name string
		g    source.GitSource
		want string
	}{
		{"no credentials", source.GitSource{URL: url, Ref: map[string]string{"branch": "main"}}, "authentication required"},
		{"wrong token", source.GitSource{URL: url, Ref: map[string]string{"branch": "main"}, Username: "cluster-init", Password: "wrong-secret-token"}, "are refused"},
		{"no such branch", source.GitSource{URL: url, Ref: map[string]string{"branch": "nope"}, Username: "cluster-init", Password: token}, "no branch nope"},
		{"no such repository", source.GitSource{URL: strings.Replace(url, "r.git", "other.git", 1), Ref: map[string]string{"branch": "main"}, Username: "cluster-init", Password: token}, ""},
	} {
		_, err := c.g.Remote(ctx)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "wrong-secret-token") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	_, err := source.GitSource{URL: "http://no-such-host.invalid/r.git", Ref: map[string]string{"branch": "main"}}.Remote(ctx)
	if !errors.Is(err, source.ErrUnreachable) {
		t.Errorf("unreachable: %v", err)
	}
}

// A token in the checkout's origin URL does not become the source URL (a value, a ConfigMap,
// printed): the credentials come from the environment's secrets.
func TestCheckoutGitDropsCredentialsOfTheOrigin(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"remote", "add", "origin", "https://bob:t0ken-in-url@git.example.invalid/org/repo.git"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	g, err := source.CheckoutGit(t.Context(), dir, source.GitSource{})
	if err != nil {
		t.Fatal(err)
	}
	if g.URL != "https://git.example.invalid/org/repo.git" || g.Ref["branch"] != "main" {
		t.Errorf("source %q %v", g.URL, g.Ref)
	}
	if out, err := exec.Command("git", "-C", dir, "remote", "set-url", "origin", "git@git.example.invalid:org/repo.git").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if g, err := source.CheckoutGit(t.Context(), dir, source.GitSource{}); err != nil || g.URL != "git@git.example.invalid:org/repo.git" {
		t.Errorf("an scp-like URL became %q (%v)", g.URL, err)
	}
}
