package tenantsources

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/boundedfile"
)

// entry is one entry of a test artifact.
type entry struct {
	name string
	kind byte
	data string
}

func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		kind := e.kind
		if kind == 0 {
			kind = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: kind, Mode: 0o644, Size: int64(len(e.data))}
		if kind != tar.TypeReg {
			h.Size = 0
		}
		if kind == tar.TypeSymlink {
			h.Linkname = e.data
		}
		if kind == tar.TypeChar {
			h.Devmajor, h.Devminor = 1, 5
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if kind == tar.TypeReg {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// errBomb stands for what the manifest check says of a file it refuses.
var errBomb = errors.New("bomb.yaml: its YAML aliases expand to more than 100000 values")

func testBounds() Bounds {
	b := DefaultBounds()
	b.CheckManifest = func(name string, data []byte, _ *boundedfile.Budget) error {
		if strings.Contains(string(data), "*a") {
			return errBomb
		}
		return nil
	}
	b.Files, b.FileBytes, b.TotalBytes = 5, 100, 250
	return b
}

const cluster = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\n"

func TestADirectoryWithinItsBoundsIsCheckedWhole(t *testing.T) {
	s, err := Check(tarball(t,
		entry{name: "clusters", kind: tar.TypeDir},
		entry{name: "clusters/wl1/cluster.yaml", data: cluster},
		entry{name: "clusters/wl2/cluster.yml", data: cluster},
		entry{name: "clusters/README.md", data: "# not a manifest *a"},
	), testBounds())
	if err != nil {
		t.Fatal(err)
	}
	if s.Files != 4 || s.Manifests != 2 || s.Bytes != int64(2*len(cluster)+19) {
		t.Errorf("summary %+v", s)
	}
}

func TestADirectoryPastABoundIsRefusedNamingTheFileAndTheBound(t *testing.T) {
	big := strings.Repeat("x", 101)
	for _, tc := range []struct {
		name    string
		entries []entry
		want    string
	}{
		{"a manifest the check refuses", []entry{{name: "a/bomb.yaml", data: "a: &a [1]\nb: [*a]"}}, "bomb.yaml: its YAML aliases"},
		{"a link", []entry{{name: "a/link.yaml", kind: tar.TypeSymlink, data: "/dev/zero"}}, "a/link.yaml: not a regular file"},
		{"a device", []entry{{name: "a/zero.yaml", kind: tar.TypeChar}}, "a/zero.yaml: not a regular file"},
		{"a hard link", []entry{{name: "a/x.yaml", data: cluster}, {name: "a/y.yaml", kind: tar.TypeLink, data: "a/x.yaml"}}, "a/y.yaml: not a regular file"},
		{"a path outside", []entry{{name: "../../etc/x.yaml", data: cluster}}, "../../etc/x.yaml: a path outside"},
		{"a file too large", []entry{{name: "a/big.md", data: big}}, "a/big.md: 101 bytes: expected a file of at most 100"},
		{"files too large together", []entry{{name: "a", data: big[:90]}, {name: "b", data: big[:90]}, {name: "c", data: big[:90]}}, "c: the directory's files add up to more than 250 bytes"},
		{"too many files", []entry{{name: "1", data: ""}, {name: "2", data: ""}, {name: "3", data: ""}, {name: "4", data: ""}, {name: "5", data: ""}, {name: "6", data: ""}}, "more than 5 files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tarball(t, tc.entries...), testBounds())
			if !IsRefused(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

func TestACompressedArtifactPastItsBoundIsRefusedUnread(t *testing.T) {
	b := testBounds()
	b.ArtifactBytes = 10
	_, err := Check(tarball(t, entry{name: "a.yaml", data: cluster}), b)
	if !IsRefused(err) || !strings.Contains(err.Error(), "compressed: expected at most 10") {
		t.Errorf("got %v", err)
	}
}

// An artifact that is not a gzipped tar is source-controller's fault, not the tenant's: an error,
// tried again, not a refusal.
func TestAnArchiveThatIsNotOneIsAnErrorNotARefusal(t *testing.T) {
	_, err := Check([]byte("not gzip"), testBounds())
	if err == nil || IsRefused(err) {
		t.Errorf("got %v, want an error of the platform's", err)
	}
}

// The gate's bounds are the CLI's for the same files: an alias bomb, a file nested too deep and a
// file too large are refused by both, naming the file.
func TestTheGateRefusesWhatValidateRefuses(t *testing.T) {
	bomb := "a: &a [1,1,1,1,1,1,1,1,1,1]\n"
	for i, prev := 1, "a"; i <= 6; i++ {
		name := string(rune('a' + i))
		bomb += name + ": &" + name + " [*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + "]\n"
		prev = name
	}
	for _, tc := range []struct{ name, data, want string }{
		{"x/bomb.yaml", bomb, "x/bomb.yaml: "},
		{"x/deep.yaml", "a: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n", "x/deep.yaml: nests deeper"},
		{"x/big.yaml", "# " + strings.Repeat("x", 300<<10) + "\n", "x/big.yaml: 307203 bytes: expected a file of at most 262144"},
	} {
		_, err := Check(tarball(t, entry{name: tc.name, data: tc.data}), DefaultBounds())
		if !IsRefused(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
	// Files each within the bounds, past them together: their aliases, their bytes.
	var small string
	{
		small = "a: &a [x,x,x,x,x,x,x,x,x,x,x,x,x,x]\n"
		for i, prev := 1, "a"; i <= 3; i++ {
			name := string(rune('a' + i))
			small += name + ": &" + name + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 14), ",") + "]\n"
			prev = name
		}
	}
	plain := "# " + strings.Repeat("x", 200<<10) + "\n"
	for _, tc := range []struct {
		name    string
		entries []entry
		want    string
	}{
		{"three small bombs", []entry{{name: "x/1.yaml", data: small}, {name: "x/2.yaml", data: small}, {name: "x/3.yaml", data: small}},
			"x/3.yaml: its YAML aliases (*name) expand to more than 100000 values in the directory"},
		{"25 files of 200 KiB", func() []entry {
			var es []entry
			for i := range 25 {
				es = append(es, entry{name: fmt.Sprintf("x/%02d.yaml", i), data: plain})
			}
			return es
		}(), "the directory's files add up to more than 4194304 bytes"},
	} {
		_, err := Check(tarball(t, tc.entries...), DefaultBounds())
		if !IsRefused(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
}
