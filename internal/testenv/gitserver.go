package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// GitServerUser is the user name the test bed's git server takes.
const GitServerUser = "cluster-init"

// GitServer builds and runs the test bed's git server (tools/testbed/gitserver: git's
// git-http-backend behind basic authentication) on a free port of the loopback, with an empty
// repository named repo; it returns the server's address and token. Skips without
// git-http-backend (Debian package git).
func GitServer(t testing.TB, repo string) (addr, token string) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/git-core/git-http-backend"); err != nil {
		t.Skip("git-http-backend is not installed (Debian package git)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gitserver")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(Checkout(t), "tools/testbed/gitserver")).CombinedOutput(); err != nil {
		t.Fatalf("build the git server: %v\n%s", err, out)
	}
	token = "test-token-7f3a"
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	srv := exec.Command(bin, "-root", filepath.Join(dir, "repos"), "-listen", addr, "-token-file", filepath.Join(dir, "token"), "-init", repo)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for i := 0; i < 50; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, token
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the git server does not listen")
	return "", ""
}
