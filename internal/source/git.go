package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

// GitSource is a git repository the clusters reconcile from: a branch (or a tag or a commit) of a
// URL, read with credentials when it needs them.
type GitSource struct {
	URL string
	// Ref is what to check out: branch, tag or commit (the `source.ref` values).
	Ref map[string]string
	// Username and Password (a token) authenticate over HTTPS; never printed.
	Username, Password string
}

// Values are the `source` values of the git source; secretRef names the Secret of its credentials
// when it has some, environment the environment's directory in the repository.
func (g GitSource) Values(secretRef, environment string) map[string]any {
	ref := map[string]any{}
	for k, v := range g.Ref {
		ref[k] = v
	}
	v := map[string]any{"type": "git", "url": g.URL, "ref": ref, "environment": environment}
	if g.Username != "" || g.Password != "" {
		v["secret_ref"] = secretRef
	}
	return v
}

func (g GitSource) String() string {
	for _, k := range []string{"commit", "tag", "branch"} {
		if g.Ref[k] != "" {
			return fmt.Sprintf("%s %s %s", g.URL, k, g.Ref[k])
		}
	}
	return g.URL
}

// CheckoutGit completes a git source from the checkout: the URL of its remote origin when none is
// given, its current branch when no ref is.
func CheckoutGit(ctx context.Context, repoRoot string, g GitSource) (GitSource, error) {
	if g.URL == "" {
		origin, err := gitOutput(ctx, repoRoot, "remote", "get-url", "origin")
		if err != nil {
			return g, fmt.Errorf("--source git: no source.url in the values and the checkout has no remote origin: %w", err)
		}
		g.URL = withoutUserInfo(origin)
	}
	if len(g.Ref) == 0 {
		branch, err := gitOutput(ctx, repoRoot, "symbolic-ref", "--short", "HEAD")
		if err != nil {
			return g, fmt.Errorf("--source git: no source.ref in the values and the checkout is on no branch: %w", err)
		}
		g.Ref = map[string]string{"branch": branch}
	}
	return g, nil
}

// withoutUserInfo drops the user and password an origin URL may carry (https://user:token@host):
// the URL goes into the values, a ConfigMap, and is printed; credentials come from the
// environment's secrets.
func withoutUserInfo(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil || u.Host == "" {
		return raw // scp-like (git@host:path) or not a URL: no password in it
	}
	u.User = nil
	return u.String()
}

// ErrUnreachable is returned by Remote when the host cannot reach the repository at all (its name
// does not resolve here, say): the clusters may still reach it.
var ErrUnreachable = errors.New("the repository cannot be reached from this machine")

// Remote looks at the repository as source-controller will (the same git library, the same
// credentials) and returns the commit the ref points to. Authentication, a missing repository or
// ref are errors that say so; a repository this machine cannot reach is ErrUnreachable.
func (g GitSource) Remote(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{g.URL}})
	opts := &git.ListOptions{}
	if g.Username != "" || g.Password != "" {
		opts.Auth = &githttp.BasicAuth{Username: g.Username, Password: g.Password}
	}
	refs, err := rem.ListContext(ctx, opts)
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired) && opts.Auth == nil:
		return "", fmt.Errorf("%s: authentication required: set credentials.git.username and credentials.git.password in the environment's secrets", g.URL)
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return "", fmt.Errorf("%s: the credentials of credentials.git are refused (user %q)", g.URL, g.Username)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return "", fmt.Errorf("%s: no such repository", g.URL)
	case err != nil:
		return "", fmt.Errorf("%w (%s: %v)", ErrUnreachable, g.URL, err)
	}
	if c := g.Ref["commit"]; c != "" {
		return c, nil
	}
	kind, want := "branch", plumbing.NewBranchReferenceName(g.Ref["branch"])
	if t := g.Ref["tag"]; t != "" {
		kind, want = "tag", plumbing.NewTagReferenceName(t)
	}
	for _, r := range refs {
		if r.Name() == want {
			return r.Hash().String(), nil
		}
	}
	return "", fmt.Errorf("%s: no %s %s in the repository", g.URL, kind, want.Short())
}

// Uncommitted lists the changes of the checkout's working tree under paths that are not committed.
func Uncommitted(ctx context.Context, repoRoot string, paths ...string) (string, error) {
	return gitOutput(ctx, repoRoot, append([]string{"status", "--porcelain", "--"}, paths...)...)
}

// Head is the commit of the checkout.
func Head(ctx context.Context, repoRoot string) (string, error) {
	return gitOutput(ctx, repoRoot, "rev-parse", "HEAD")
}

func gitOutput(ctx context.Context, repoRoot string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repoRoot}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
