package standalone

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/secrets"
)

func newKey(t *testing.T) *Key {
	t.Helper()
	data, _, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := parseKey("test key", data)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const caKey = "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecret\n-----END RSA PRIVATE KEY-----"

// exportDir writes what clusterctl move --to-directory writes for a small cluster.
func exportDir(t *testing.T, clusters int) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, obj map[string]any) {
		data, _ := json.Marshal(obj)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range clusters {
		name := "solo"
		if i > 0 {
			name = "other"
		}
		write("Cluster_cluster-init_"+name+".yaml", map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": map[string]any{"name": name}})
	}
	write("Secret_cluster-init_solo-ca.yaml", map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "solo-ca"}, "stringData": map[string]any{"tls.key": caKey}})
	write("MachineDeployment_cluster-init_solo-md-0.yaml", map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": map[string]any{"name": "solo-md-0"}})
	return dir
}

func newState(t *testing.T, k *Key) (Dir, *State) {
	t.Helper()
	d, err := DirOf(t.TempDir(), "kubeadm-capd")
	if err != nil {
		t.Fatal(err)
	}
	st := &State{Environment: "kubeadm-capd", Cluster: "solo", Namespace: "cluster-init", Recipient: k.Recipient(),
		BootstrapCluster: BootstrapCluster{Name: "bootstrap", NodeImage: "kindest/node:v1.37.0"},
		ManagementUnits:  []ManagementUnit{{Name: CNIUnit}, {Name: "capi", WaitFor: []string{CNIUnit}}}}
	if err := d.Save(st); err != nil {
		t.Fatal(err)
	}
	if err := d.StoreManagement(k, CNIUnit, []byte("---\nkind: DaemonSet\n"), false); err != nil {
		t.Fatal(err)
	}
	if err := d.StoreManagement(k, "capi", []byte("---\nkind: Secret\n"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := d.StoreObjects(k, exportDir(t, 1)); err != nil {
		t.Fatal(err)
	}
	return d, st
}

// Every file and directory of the state is its owner's only, and no Secret is in it in clear.
func TestStateIsPrivateAndItsSecretsEncrypted(t *testing.T) {
	k := newKey(t)
	d, _ := newState(t, k)
	err := filepath.Walk(d.Path, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if info.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, info.Mode().Perm(), want)
		}
		if data, _ := os.ReadFile(path); !info.IsDir() && bytes.Contains(data, []byte("MIIEsecret")) {
			t.Errorf("%s holds the CA key in clear", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.Path, "objects", "Secret_cluster-init_solo-ca.yaml.age")); err != nil {
		t.Errorf("the Secret is not stored encrypted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.Path, "management", "capi.yaml.age")); err != nil {
		t.Errorf("a management unit with a Secret is not stored encrypted: %v", err)
	}

	// What clusterctl restores from is the objects as exported, decrypted.
	dir, done, err := d.RestoreDir(k)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "Secret_cluster-init_solo-ca.yaml"))
	if err != nil || !bytes.Contains(data, []byte("MIIEsecret")) {
		t.Errorf("restored Secret: %q, %v", data, err)
	}
	done()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the decrypted objects outlive the restore: %v", err)
	}
}

func TestCheckRefusesADamagedStateOrTheWrongKey(t *testing.T) {
	k := newKey(t)
	for name, damage := range map[string]func(d Dir){
		"state.json not JSON": func(d Dir) { os.WriteFile(filepath.Join(d.Path, "state.json"), []byte("{"), 0o600) },
		"no Cluster":          func(d Dir) { os.Remove(filepath.Join(d.Path, "objects", "Cluster_cluster-init_solo.yaml")) },
		"Secret truncated": func(d Dir) {
			p := filepath.Join(d.Path, "objects", "Secret_cluster-init_solo-ca.yaml.age")
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)/2], 0o600)
		},
		"object not JSON": func(d Dir) {
			os.WriteFile(filepath.Join(d.Path, "objects", "MachineDeployment_cluster-init_solo-md-0.yaml"), []byte("}"), 0o600)
		},
		"management missing":  func(d Dir) { os.Remove(filepath.Join(d.Path, "management", "capi.yaml.age")) },
		"no objects at all":   func(d Dir) { os.RemoveAll(filepath.Join(d.Path, "objects")) },
		"unknown version":     func(d Dir) { rewriteState(t, d, func(st *State) { st.Version = 99 }) },
		"no age recipient":    func(d Dir) { rewriteState(t, d, func(st *State) { st.Recipient = "" }) },
		"no management units": func(d Dir) { rewriteState(t, d, func(st *State) { st.ManagementUnits = nil }) },
	} {
		t.Run(name, func(t *testing.T) {
			d, _ := newState(t, k)
			if _, err := d.Check(k); err != nil {
				t.Fatalf("intact state refused: %v", err)
			}
			damage(d)
			_, err := d.Check(k)
			if err == nil {
				t.Fatal("damaged state accepted")
			}
			if strings.Contains(err.Error(), "MIIEsecret") {
				t.Errorf("the error quotes the secret: %v", err)
			}
			t.Log(err)
		})
	}
	t.Run("another key", func(t *testing.T) {
		d, _ := newState(t, k)
		_, err := d.Check(newKey(t))
		if err == nil || !strings.Contains(err.Error(), k.Recipient()) {
			t.Fatalf("a state checked with a key that does not open it: %v", err)
		}
	})
}

func rewriteState(t *testing.T, d Dir, change func(*State)) {
	data, _ := os.ReadFile(filepath.Join(d.Path, "state.json"))
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	change(&st)
	data, _ = json.Marshal(st)
	os.WriteFile(filepath.Join(d.Path, "state.json"), data, 0o600)
}

// An export with other than one Cluster leaves the state as it was; a replacement killed between
// its two renames is finished by the next reader.
func TestObjectsAreReplacedWhole(t *testing.T) {
	k := newKey(t)
	d, _ := newState(t, k)
	if _, err := d.StoreObjects(k, exportDir(t, 2)); err == nil {
		t.Fatal("an export of two Clusters was stored")
	}
	if _, err := d.Check(k); err != nil {
		t.Fatalf("the refused export damaged the state: %v", err)
	}
	// Killed between the two renames: objects.old/ (the previous export) and a complete
	// objects.new/.
	cur := filepath.Join(d.Path, "objects")
	if err := os.Rename(cur, cur+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cur+".old", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Check(k); err != nil {
		t.Fatalf("a replacement interrupted after the first rename is not finished: %v", err)
	}
	// Killed while the first export was written: a partial objects.new/ alone is not promoted.
	if err := os.Rename(cur, cur+".new"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Check(k); err == nil {
		t.Fatal("a partial first export was taken for the objects")
	}
	if _, err := os.Stat(cur + ".new"); !os.IsNotExist(err) {
		t.Errorf("the partial export was left: %v", err)
	}
}

func TestLockRefusesASecondCommand(t *testing.T) {
	d, err := DirOf(t.TempDir(), "env")
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.Lock("bootstrap scale env")
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Lock("bootstrap delete env")
	if err == nil || !strings.Contains(err.Error(), "bootstrap scale env") || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second lock: %v", err)
	}
	first.Release()
	again, err := d.Lock("bootstrap delete env")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Release()
}

func TestExportImport(t *testing.T) {
	k := newKey(t)
	d, st := newState(t, k)
	var buf bytes.Buffer
	n, err := d.Archive(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("MIIEsecret")) {
		t.Fatal("the export holds the CA key in clear")
	}
	other := t.TempDir()
	if _, _, err := Import(other, bytes.NewReader(buf.Bytes()), newKey(t)); err == nil {
		t.Fatal("imported with a key that does not open it")
	}
	got, gotState, err := Import(other, bytes.NewReader(buf.Bytes()), k)
	if err != nil {
		t.Fatal(err)
	}
	if gotState.Cluster != st.Cluster || got.Path != filepath.Join(other, "kubeadm-capd") {
		t.Errorf("imported %s into %s", gotState.Cluster, got.Path)
	}
	files, _ := got.Files()
	if len(files) != n {
		t.Errorf("imported %d files, exported %d", len(files), n)
	}
	if _, _, err := Import(other, bytes.NewReader(buf.Bytes()), k); err == nil || !strings.Contains(err.Error(), "already has a state") {
		t.Fatalf("a second import over an existing state: %v", err)
	}
}

func TestImportRefusesWhatIsNotAState(t *testing.T) {
	k := newKey(t)
	for name, entry := range map[string]string{
		"escapes":          "../../etc/passwd",
		"absolute":         "/etc/passwd",
		"unknown file":     "notes.txt",
		"nested elsewhere": "objects/sub/x.yaml",
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			tw.WriteHeader(&tar.Header{Name: entry, Mode: 0o600, Size: 1, Typeflag: tar.TypeReg})
			tw.Write([]byte("x"))
			tw.Close()
			zw.Close()
			root := t.TempDir()
			_, _, err := Import(root, &buf, k)
			if err == nil || !strings.Contains(err.Error(), "unexpected entry") {
				t.Fatalf("archive with %q: %v", entry, err)
			}
			if _, err := os.Stat(filepath.Join(root, "etc")); err == nil {
				t.Fatal("an entry was written outside the state")
			}
		})
	}
	if _, _, err := Import(t.TempDir(), strings.NewReader("not gzip"), k); err == nil {
		t.Fatal("a file that is no archive was imported")
	}
}

func TestDirOfRefusesNamesThatAreNotDirectories(t *testing.T) {
	for _, env := range []string{"..", "a/../..", "", "x\x00"} {
		if d, err := DirOf("/state", env); err == nil {
			t.Errorf("DirOf(%q) = %s", env, d.Path)
		}
	}
	d, err := DirOf("/state", "workload-clusters/team-a")
	if err != nil || d.Path != "/state/workload-clusters_team-a" {
		t.Errorf("DirOf of a nested environment: %s, %v", d.Path, err)
	}
}

// The bootstrap cluster of a state written by the first format (kindcluster.Config's field names
// as keys) still reads: state.json's format is its own type's, not kindcluster's.
func TestTheBootstrapClusterRecordKeepsItsKeys(t *testing.T) {
	written := `{"Name":"cluster-init-bootstrap","NodeImage":"cluster-init-testbed/kind-node:v1.37.0","PodSubnet":"10.244.0.0/16","ServiceSubnet":"10.96.0.0/16",` +
		`"Mirrors":{"registry.example":[{"mirror_url":"http://mirror:5000","override_path":true}]},"Environment":"kubeadm-capd"}`
	var b BootstrapCluster
	if err := json.Unmarshal([]byte(written), &b); err != nil {
		t.Fatal(err)
	}
	kc := b.Kind("kubeadm-capd")
	if kc.Name != "cluster-init-bootstrap" || kc.NodeImage != "cluster-init-testbed/kind-node:v1.37.0" || kc.PodSubnet != "10.244.0.0/16" ||
		kc.ServiceSubnet != "10.96.0.0/16" || len(kc.Mirrors["registry.example"]) != 1 || !kc.Mirrors["registry.example"][0].OverridePath || kc.Environment != "kubeadm-capd" {
		t.Errorf("read back: %+v", kc)
	}
	again, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"Name":`, `"NodeImage":`, `"PodSubnet":`, `"ServiceSubnet":`, `"Mirrors":`} {
		if !strings.Contains(string(again), key) {
			t.Errorf("written again without %s: %s", key, again)
		}
	}
}

// A state of version 1 (the operation's steps as flags) reads as the step machine's record, so a
// change an older build left half-way is continued; it is written again as the current version.
func TestAnOperationOfVersion1ReadsAsStepsRecord(t *testing.T) {
	for _, c := range []struct {
		name, command, flags string
		done                 []string
		running              string
		complete             bool
	}{
		{"creation exported", CommandCreate, `"restored":true,"applied":true,"finished":true`, []string{StepRestore, StepChange, StepExport}, "", true},
		{"creation not exported", CommandCreate, `"restored":true,"applied":true`, []string{StepRestore, StepChange}, "", false},
		{"scale restored", CommandScale, `"restored":true,"applied":false`, []string{StepRestore}, "", false},
		{"scale applied", CommandScale, `"restored":true,"applied":true`, []string{StepRestore}, StepChange, false},
		{"scale kept", CommandScale, `"restored":true,"applied":true,"finished":true`, []string{StepRestore, StepChange, StepExport}, "", true},
		{"deletion under way", CommandDelete, `"restored":true,"applied":true`, []string{StepRestore}, StepChange, false},
		{"deletion done", CommandDelete, `"restored":true,"applied":true,"finished":true`, []string{StepRestore, StepChange}, "", true},
		{"nothing yet", CommandUpgrade, `"restored":false`, nil, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := DirOf(t.TempDir(), "env")
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Save(validState("env", nil)); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(d.file(stateFile))
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]any
			if err := json.Unmarshal(data, &raw); err != nil {
				t.Fatal(err)
			}
			var pending map[string]any
			if err := json.Unmarshal([]byte(`{"command":"`+c.command+`","started":"2026-11-20T10:00:00Z",`+c.flags+`}`), &pending); err != nil {
				t.Fatal(err)
			}
			raw["version"], raw["pending"] = 1, pending
			data, _ = json.Marshal(raw)
			if err := os.WriteFile(d.file(stateFile), data, 0o600); err != nil {
				t.Fatal(err)
			}
			st, err := d.Load()
			if err != nil {
				t.Fatal(err)
			}
			p := st.Pending
			if !slices.Equal(p.Done, c.done) || p.Running != c.running || p.Complete() != c.complete {
				t.Errorf("read as done %v, running %q, complete %t", p.Done, p.Running, p.Complete())
			}
			if err := d.Save(st); err != nil {
				t.Fatal(err)
			}
			again, err := d.Load()
			if err != nil || again.Version != FormatVersion || !slices.Equal(again.Pending.Done, c.done) || again.Pending.Running != c.running {
				t.Errorf("written again: %+v, %v", again, err)
			}
		})
	}
}
