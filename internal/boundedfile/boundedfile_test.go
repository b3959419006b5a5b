package boundedfile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/testenv"
)

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func link(t *testing.T, target, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A file the user names is followed where it leads, but only a regular file within its kind's
// size is read: a device, a FIFO (which would block) and a file that never ends cost nothing.
func TestANamedFileIsARegularFileOfBoundedSize(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.agekey")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100 << 20); err != nil { // sparse: 100 MB that cost no disk
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct{ name, path, want string }{
		{"/dev/zero", "/dev/zero", "not a regular file (a character device)"},
		{"a link to /dev/zero", link(t, "/dev/zero", filepath.Join(dir, "zero.agekey")), "not a regular file (a character device)"},
		{"a link to /dev/urandom", link(t, "/dev/urandom", filepath.Join(dir, "random.agekey")), "not a regular file (a character device)"},
		{"a FIFO", fifo, "not a regular file (a FIFO)"},
		{"100 MB", big, "larger than 64 KiB: expected an age key file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if n := allocated(func() { _, err = boundedfile.ReadFile(c.path, "KEY", boundedfile.AgeKey) }); n > 1<<20 {
				t.Errorf("refusing it allocated %d bytes", n)
			}
			if err == nil || !strings.Contains(err.Error(), "KEY: "+c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	ok := write(t, filepath.Join(dir, "ok.agekey"), "AGE-SECRET-KEY-1\n")
	if data, err := boundedfile.ReadFile(link(t, ok, filepath.Join(dir, "link.agekey")), "KEY", boundedfile.AgeKey); err != nil || string(data) != "AGE-SECRET-KEY-1\n" {
		t.Errorf("a link to a key file: %q, %v", data, err)
	}
}

// A file of a checkout is read inside it: a link out of it never, and no link at all where Flux
// follows none.
func TestAFileOfACheckoutStaysInIt(t *testing.T) {
	root := t.TempDir()
	outside := write(t, filepath.Join(t.TempDir(), "secret.yaml"), "a: b\n")
	write(t, filepath.Join(root, "env/values.yaml"), "a: b\n")
	link(t, outside, filepath.Join(root, "env/out.yaml"))
	link(t, "values.yaml", filepath.Join(root, "env/in.yaml"))
	link(t, "env", filepath.Join(root, "linked"))
	link(t, "/dev/zero", filepath.Join(root, "env/zero.yaml"))

	for _, c := range []struct {
		rel   string
		links boundedfile.Links
		want  string
	}{
		{"env/values.yaml", boundedfile.NoLinks, ""},
		{"env/in.yaml", boundedfile.LinksInside, ""},
		{"env/out.yaml", boundedfile.LinksInside, "env/out.yaml: a symbolic link out of"},
		{"env/zero.yaml", boundedfile.LinksInside, "env/zero.yaml: a symbolic link out of"},
		{"env/in.yaml", boundedfile.NoLinks, "env/in.yaml: a symbolic link: source-controller leaves links out"},
		{"linked/values.yaml", boundedfile.NoLinks, "linked/values.yaml: a symbolic link"},
	} {
		data, err := boundedfile.ReadIn(root, c.rel, boundedfile.Values, c.links)
		switch {
		case c.want == "" && (err != nil || string(data) != "a: b\n"):
			t.Errorf("%s: %q, %v", c.rel, data, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.rel, err, c.want)
		}
	}
}

// The bytes of a manifest are checked for what their parse would cost, apart from how they were
// read: aliases that expand, documents, depth, size. A large plain file is no bomb.
func TestCheckManifest(t *testing.T) {
	var plain strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&plain, "k%d: [a, b, c, d, e, f]\n", i) // 160,000 values as written
	}
	deep := strings.Repeat("[", boundedfile.MaxDepth+1) + strings.Repeat("]", boundedfile.MaxDepth+1) + "\n"
	self := "a: &a\n  b: *a\n"
	for _, c := range []struct{ name, data, want string }{
		{"an alias bomb", testenv.AliasBomb, "f.yaml: its YAML aliases (*name) expand to more than 100000 values in the file: expected plain values"},
		{"an alias bomb in a later document", "a: b\n---\n" + testenv.AliasBomb, "expand to more than"},
		{"an alias of its own anchor", self, "expand to more than"},
		{"documents each within the bound, past it together", strings.Repeat(smallBomb+"---\n", 3), "expand to more than 100000 values in the file"},
		{"too deep", deep, "f.yaml: nests deeper than 128 levels"},
		{"too many documents", strings.Repeat("a: b\n---\n", 1001), "f.yaml:2000: more than 1000 YAML documents"},
		{"too large", "# " + strings.Repeat("x", 300<<10), "f.yaml: larger than 256 KiB: expected a manifest file"},
		{"empty documents", strings.Repeat("---\n", 5000), ""},
		{"not YAML (for its parser to say)", "a: [\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := boundedfile.CheckManifest("f.yaml", []byte(c.data))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	if err := boundedfile.PlacedManifest.Check("f.yaml", []byte(plain.String())); err != nil {
		t.Errorf("a large plain file: %v", err)
	}
	if err := boundedfile.Values.Check("v.yaml", []byte("a: 1\n---\nb: 2\n")); err == nil || !strings.Contains(err.Error(), "v.yaml:2: a second YAML document") {
		t.Errorf("a values file of two documents: %v", err)
	}
}

// A walk reads what its selection keeps, within bounds, and never opens a link or a device.
func TestReadTree(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "d/a.yaml"), "a: 1\n")
	write(t, filepath.Join(root, "d/sub/b.yml"), "b: 1\n")
	write(t, filepath.Join(root, "d/README.md"), "# notes\n")
	write(t, filepath.Join(root, "d/skipped/c.yaml"), "c: 1\n")
	link(t, "/dev/zero", filepath.Join(root, "d/zero.yaml"))
	link(t, "a.yaml", filepath.Join(root, "d/again.yaml"))
	fifo := filepath.Join(root, "d/fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tree, err := boundedfile.ReadTree(root, "d", boundedfile.Manifest, func(rel string, d os.DirEntry) boundedfile.Choice {
		if rel == "d/skipped" {
			return boundedfile.Skip
		}
		return boundedfile.Read
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tree.Order, ","); got != "d/README.md,d/a.yaml,d/sub/b.yml" {
		t.Errorf("read %s", got)
	}
	var unread []string
	for _, e := range tree.Unread {
		unread = append(unread, e.Error())
	}
	want := []string{"d/again.yaml: a symbolic link", "d/fifo.yaml: not a regular file (a FIFO)", "d/zero.yaml: a symbolic link"}
	if len(unread) != len(want) {
		t.Fatalf("unread %q", unread)
	}
	for i := range want {
		if !strings.HasPrefix(unread[i], want[i]) {
			t.Errorf("unread %q, want %q", unread[i], want[i])
		}
	}

	// The directory itself a link: not followed.
	link(t, "d", filepath.Join(root, "e"))
	if tree, err := boundedfile.ReadTree(root, "e", boundedfile.Manifest, nil); err != nil || len(tree.Files) != 0 || len(tree.Unread) != 1 {
		t.Errorf("a linked directory: %v, %+v", err, tree)
	}

	// Bounds: a file too large, too many files, a bomb.
	write(t, filepath.Join(root, "big/x.yaml"), strings.Repeat("#", 300<<10))
	write(t, filepath.Join(root, "bomb/x.yaml"), testenv.AliasBomb)
	for i := range boundedfile.MaxTreeFiles + 1 {
		write(t, filepath.Join(root, "many", fmt.Sprintf("%05d.yaml", i)), "a: 1\n")
	}
	for dir, want := range map[string]string{
		"big":  "big/x.yaml: larger than 256 KiB",
		"bomb": "bomb/x.yaml: its YAML aliases",
		"many": "many: more than 2000 files",
	} {
		if _, err := boundedfile.ReadTree(root, dir, boundedfile.Manifest, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", dir, err, want)
		}
	}
}

// smallBomb is a document whose aliases add about 44,000 values: within the bound alone.
var smallBomb = func() string {
	doc := "a: &a [x,x,x,x,x,x,x,x,x,x,x,x,x,x]\n"
	for i, prev := 1, "a"; i <= 3; i++ {
		name := string(rune('a' + i))
		doc += name + ": &" + name + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 14), ",") + "]\n"
		prev = name
	}
	return doc
}()

// Files of a directory each within the bound are refused when their aliases add up past it: the
// directory is built in one process.
func TestADirectorysAliasesAddUp(t *testing.T) {
	if err := boundedfile.CheckManifest("one.yaml", []byte(smallBomb)); err != nil {
		t.Fatalf("one small bomb alone: %v", err)
	}
	root := t.TempDir()
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.yaml", i)), []byte(smallBomb), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := boundedfile.ReadTree(root, ".", boundedfile.Manifest, nil)
	if err == nil || !strings.Contains(err.Error(), "f2.yaml: its YAML aliases (*name) expand to more than 100000 values in the directory") {
		t.Errorf("three small bombs in a directory: %v", err)
	}
}

// A directory of manifests holds at most 4 MiB: kustomize holds tens of times that in memory.
func TestADirectoryOfManifestsIsBoundedWhole(t *testing.T) {
	root := t.TempDir()
	file := strings.Repeat("# plain\n", 200<<10/8)
	for i := range 25 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%02d.yaml", i)), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := boundedfile.ReadTree(root, ".", boundedfile.Manifest, nil)
	if err == nil || !strings.Contains(err.Error(), "more than 4 MiB of files") {
		t.Errorf("25 files of 200 KiB: %v", err)
	}
}
