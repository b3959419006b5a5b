package backup_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"cluster-init.dev/cluster-init/internal/backup"
)

func newKey(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

const caKey = "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretcaKEYmaterial\n-----END RSA PRIVATE KEY-----\n"

func sample() backup.Contents {
	return backup.Contents{
		Meta: backup.Meta{Environment: "kubeadm-capd", Cluster: "management", Created: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC),
			Reason: backup.ReasonSchedule, Version: "test", Namespaces: []backup.Namespace{
				{Name: "cluster-init", Management: true, Clusters: []string{"management"}, Objects: 2},
				{Name: "workload-clusters", Clusters: []string{"wl1"}, Objects: 2}}},
		Files: map[string][]byte{
			"clusterctl/cluster-init/Cluster_cluster-init_management.yaml":      []byte("kind: Cluster\n"),
			"clusterctl/cluster-init/Secret_cluster-init_management-ca.yaml":    []byte("kind: Secret\ndata:\n  tls.key: " + caKey),
			"clusterctl/workload-clusters/Cluster_workload-clusters_wl1.yaml":   []byte("kind: Cluster\n"),
			"clusterctl/workload-clusters/Secret_workload-clusters_wl1-ca.yaml": []byte("kind: Secret\ndata:\n  tls.key: " + caKey),
			"platform/tenants.yaml": []byte("tenants: [workload-clusters]\n"),
		},
	}
}

func written(t *testing.T, c backup.Contents, recipients ...age.Recipient) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := backup.Write(&buf, c, recipients); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A backup read back with its key is what was written; nothing of it is readable in the archive
// (the certificate authority's key least of all), and it decrypts with any of its recipients.
func TestABackupIsReadBackWholeAndHoldsNothingInClear(t *testing.T) {
	ops, dr := newKey(t), newKey(t)
	c := sample()
	data := written(t, c, ops.Recipient(), dr.Recipient())
	for _, clear := range []string{"MIIEsecretcaKEYmaterial", "kind: Secret", "management-ca", "workload-clusters", "tenants"} {
		if bytes.Contains(data, []byte(clear)) {
			t.Errorf("the archive holds %q in clear", clear)
		}
	}
	for _, id := range []age.Identity{ops, dr} {
		got, err := backup.Read(bytes.NewReader(data), []age.Identity{id}, backup.Expect{Environment: "kubeadm-capd"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Meta.Format != backup.Format || got.Meta.Environment != "kubeadm-capd" || !got.Meta.Created.Equal(c.Meta.Created) || len(got.Meta.Namespaces) != 2 {
			t.Errorf("meta: %+v", got.Meta)
		}
		if len(got.Files) != len(c.Files) {
			t.Errorf("%d files, want %d", len(got.Files), len(c.Files))
		}
		for name, want := range c.Files {
			if !bytes.Equal(got.Files[name], want) {
				t.Errorf("%s: %q, want %q", name, got.Files[name], want)
			}
		}
		if ns := got.Namespaces(false); len(ns) != 1 || ns[0].Name != "workload-clusters" {
			t.Errorf("namespaces to restore: %+v", ns)
		}
		if files := got.FilesIn(backup.ClusterctlDir("workload-clusters")); len(files) != 2 || files["Cluster_workload-clusters_wl1.yaml"] == nil {
			t.Errorf("files of workload-clusters: %v", files)
		}
	}
}

// Every refusal names what is wrong: another key, another environment, a newer format, a
// truncated or damaged archive, something that is no backup.
func TestABackupIsRefusedForWhatIsWrongWithIt(t *testing.T) {
	key := newKey(t)
	data := written(t, sample(), key.Recipient())
	newer := sample()
	newer.Meta.Format = backup.Format + 1
	var flipped = append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 0x40
	for _, tc := range []struct {
		name  string
		data  []byte
		id    age.Identity
		env   string
		is    error
		shows string
	}{
		{"another key", data, newKey(t), "kubeadm-capd", backup.ErrUndecryptable, "encrypted to other recipients"},
		{"another environment", data, key, "kubeadm-capo", backup.ErrOtherEnv, `backup of environment "kubeadm-capd"`},
		{"a newer format", written(t, newer, key.Recipient()), key, "kubeadm-capd", backup.ErrNewerFormat, "format 2, this cluster-init reads formats up to 1"},
		{"truncated at half", data[:len(data)/2], key, "kubeadm-capd", backup.ErrDamaged, ""},
		{"truncated by a byte", data[:len(data)-1], key, "kubeadm-capd", backup.ErrDamaged, ""},
		{"a byte changed", flipped, key, "kubeadm-capd", backup.ErrDamaged, ""},
		{"empty", nil, key, "kubeadm-capd", backup.ErrDamaged, ""},
		{"not age", []byte("apiVersion: v1\nkind: Secret\n"), key, "kubeadm-capd", backup.ErrDamaged, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := backup.Read(bytes.NewReader(tc.data), []age.Identity{tc.id}, backup.Expect{Environment: tc.env})
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.shows) {
				t.Errorf("got %v, want %v saying %q", err, tc.is, tc.shows)
			}
			if err != nil && strings.Contains(err.Error(), "MIIE") {
				t.Errorf("the refusal quotes the backup: %v", err)
			}
		})
	}
}

// A backup may not carry a file outside its two directories, nor be written without a recipient.
func TestABackupHoldsOnlyItsOwnFiles(t *testing.T) {
	key := newKey(t)
	for _, name := range []string{"../etc/passwd", "/abs/file", "other/file", "clusterctl/../../x", "platform/./x"} {
		c := sample()
		c.Files[name] = []byte("x")
		if err := backup.Write(&bytes.Buffer{}, c, []age.Recipient{key.Recipient()}); err == nil {
			t.Errorf("a file %q was written", name)
		}
	}
	if err := backup.Write(&bytes.Buffer{}, sample(), nil); err == nil {
		t.Error("a backup was written to no recipient")
	}
	if _, err := backup.ParseRecipients([]string{"age1notakey"}); err == nil || !strings.Contains(err.Error(), "backup.recipients[0]") {
		t.Errorf("a bad recipient: %v", err)
	}
	if rs, err := backup.ParseRecipients([]string{key.Recipient().String()}); err != nil || len(rs) != 1 {
		t.Errorf("a good recipient: %v %v", rs, err)
	}
}
