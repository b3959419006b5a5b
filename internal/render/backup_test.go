package render_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/sourceignore"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/values"
)

const (
	backupRecipient = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
	backupSecretKey = "backup-secret-key-5d1e"
)

func backupEnvironment(t *testing.T, root, schedule string, withKeys bool) render.Options {
	t.Helper()
	edits := map[string]func(string) string{
		"values.yaml": func(old string) string {
			return old + "backup:\n  enabled: true\n  schedule: " + schedule + "\n  recipients: [" + backupRecipient + "]\n" +
				"  store:\n    endpoint: http://store.test:8333\n    bucket: backups\n  retention:\n    keep: 3\n    max_age_hours: 48\n"
		},
	}
	if withKeys {
		edits["secrets.yaml"] = func(string) string {
			return "credentials:\n  backup:\n    access_key: backup-access\n    secret_key: " + backupSecretKey + "\n"
		}
	}
	env, err := loadEnv(t, root, "kubeadm-capd", copyEnv(t, root, "kubeadm-capd", edits))
	if err != nil {
		t.Fatal(err)
	}
	return render.Options{Env: env, Context: render.ContextManagement, State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()}}
}

// The backup unit of a self-managed management cluster: its CronJob on the values' schedule, the
// Job's configuration as the Job reads it (the environment named), the store's keys only in their
// Secret. Not before the pivot, nor in the bootstrap cluster; refused, naming the keys, without a
// store's keys or with a schedule that is not one.
func TestTheBackupUnitRunsTheValuesSchedule(t *testing.T) {
	root := testenv.Checkout(t)
	opts := backupEnvironment(t, root, `"*/30 * * * *"`, true)
	res, err := render.Render(t.Context(), root, kubeVersion(t, root), opts)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*unstructured.Unstructured{}
	for _, o := range res.Objects {
		found[o.Object.GetKind()+"/"+o.Object.GetName()] = o.Object
		if o.Object.GetKind() != "Secret" {
			if text, _ := yamlOf(o.Object); strings.Contains(text, backupSecretKey) {
				t.Errorf("%s %s holds the store's secret key", o.Object.GetKind(), o.Object.GetName())
			}
		}
	}
	cj := found["CronJob/"+names.BackupCronJob]
	if cj == nil {
		t.Fatal("no backup CronJob")
	}
	if schedule, _, _ := unstructured.NestedString(cj.Object, "spec", "schedule"); schedule != "*/30 * * * *" {
		t.Errorf("the CronJob's schedule: %q", schedule)
	}
	cm := found["ConfigMap/"+names.BackupConfigMap]
	if cm == nil {
		t.Fatal("no backup configuration")
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", names.BackupConfigKey)
	var cfg backupjob.Config
	if err := json.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Environment != "kubeadm-capd" || cfg.Cluster != "management" || cfg.Backup.Store.Bucket != "backups" ||
		len(cfg.Backup.Recipients) != 1 || cfg.Backup.Retention.Keep != 3 || cfg.Backup.Schedule != "*/30 * * * *" {
		t.Errorf("the Job's configuration: %+v", cfg)
	}
	if _, err := cfg.ParsedRecipients(); err != nil {
		t.Error(err)
	}
	secret := found["Secret/"+names.BackupStoreSecret]
	if got, _, _ := unstructured.NestedString(secret.Object, "data", backupjob.SecretKeyFile); got != base64.StdEncoding.EncodeToString([]byte(backupSecretKey)) {
		t.Errorf("the store's Secret: %v", secret.Object["data"])
	}

	// Before the pivot the management cluster has nothing of its own to back up; the bootstrap
	// cluster never does.
	for _, o := range []render.Options{{Env: opts.Env, Context: render.ContextManagement}, {Env: opts.Env, Context: render.ContextBootstrap}} {
		res, err := render.Render(t.Context(), root, kubeVersion(t, root), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range res.Objects {
			if obj.Object.GetKind() == "CronJob" || obj.Object.GetName() == names.BackupConfigMap || obj.Object.GetName() == names.BackupStoreSecret {
				t.Errorf("context %s (self-managed %v) renders %s %s", o.Context, o.State != nil, obj.Object.GetKind(), obj.Object.GetName())
			}
		}
	}

	for _, bad := range []struct {
		name string
		opts render.Options
		want string
	}{
		{"no keys", backupEnvironment(t, root, `"0 * * * *"`, false), "credentials.backup.access_key"},
		{"a schedule that is YAML", backupEnvironment(t, root, `"0 * * * *\"\n  x: y"`, true), "backup.schedule"},
		{"not a schedule", backupEnvironment(t, root, `every-hour`, true), "backup.schedule"},
	} {
		_, err := render.Render(t.Context(), root, kubeVersion(t, root), bad.opts)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error naming %s", bad.name, err, bad.want)
		}
	}
}

// With a git source, the backup unit's change gate: the incoming source follows the branch (and a
// push fetches it: the Receiver's platform label), the release's own source is pinned to the
// commit the gate released, and to nothing before the gate released one; with
// backup.before_change false, neither.
func TestTheChangeGatePinsTheReleaseToTheReleasedCommit(t *testing.T) {
	root := testenv.Checkout(t)
	const released = "0123456789abcdef0123456789abcdef01234567"
	git := map[string]any{"type": "git", "url": "http://git.test/cluster-init.git", "ref": map[string]any{"branch": "main"}}
	render1 := func(opts render.Options, st managementstate.State) (incoming *unstructured.Unstructured, sourcePatch string) {
		t.Helper()
		opts.Source, opts.State = git, []values.Layer{st.Layer()}
		res, err := render.Render(t.Context(), root, kubeVersion(t, root), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			switch {
			case o.Object.GetKind() == "GitRepository" && o.Object.GetName() == names.IncomingSourceRepository:
				incoming = o.Object
			case o.Object.GetKind() == "Kustomization" && o.Object.GetName() == names.Release:
				patches, _, _ := unstructured.NestedSlice(o.Object.Object, "spec", "patches")
				for _, p := range patches {
					if s, _ := p.(map[string]any)["patch"].(string); strings.Contains(s, `"kind":"GitRepository"`) {
						sourcePatch = s
					}
				}
			}
		}
		return incoming, sourcePatch
	}
	opts := backupEnvironment(t, root, `"0 * * * *"`, true)
	incoming, patch := render1(opts, managementstate.State{SelfManaged: true, ReleasedCommit: released})
	if incoming == nil {
		t.Fatal("no incoming source")
	}
	if ref, _, _ := unstructured.NestedStringMap(incoming.Object, "spec", "ref"); ref["branch"] != "main" || ref["commit"] != "" {
		t.Errorf("the incoming source's ref: %v", ref)
	}
	if incoming.GetLabels()[names.RepositoryLabel] != names.PlatformRepository {
		t.Errorf("the incoming source's labels: %v", incoming.GetLabels())
	}
	// Its artifact holds the platform's directories alone (as source-controller filters it): a
	// commit of tenants' directories keeps its digest.
	ignore, _, _ := unstructured.NestedString(incoming.Object, "spec", "ignore")
	matcher := sourceignore.NewMatcher(sourceignore.ReadPatterns(strings.NewReader(ignore), nil))
	kept := func(path string) bool {
		parts := strings.Split(path, "/")
		for i := range parts {
			if matcher.Match(parts[:i+1], i < len(parts)-1) {
				return false
			}
		}
		return true
	}
	for path, want := range map[string]bool{
		"environment-values/kubeadm-capd/values.yaml":       true,
		"charts/cluster-init/Chart.yaml":                    true,
		"kustomize-components/backup/kustomization.yaml":    true,
		"clusters/management/apps/hello/application.yaml":   true,
		"clusters/management/workload-clusters/wl1/hr.yaml": false,
		"clusters/management/team-b/b-one/hr.yaml":          false,
		"clusters/other/apps/x.yaml":                        false,
		"README.md":                                         false,
	} {
		if kept(path) != want {
			t.Errorf("the incoming source keeps %s: %t, want %t (ignore:\n%s)", path, kept(path), want, ignore)
		}
	}
	if !strings.Contains(patch, `"commit":"`+released+`"`) || !strings.Contains(patch, `"branch":"main"`) {
		t.Errorf("the release's source is not pinned to the released commit: %s", patch)
	}
	// Before the gate released anything: the branch, as without a gate.
	if _, patch := render1(opts, managementstate.State{SelfManaged: true}); strings.Contains(patch, `"commit"`) {
		t.Errorf("pinned before the gate released a commit: %s", patch)
	}
	// No gate: no incoming source, no pin, whatever the state says.
	off, err := loadEnv(t, root, "kubeadm-capd", copyEnv(t, root, "kubeadm-capd", map[string]func(string) string{
		"values.yaml": func(old string) string {
			return old + "backup:\n  enabled: true\n  before_change: false\n  recipients: [" + backupRecipient + "]\n  store:\n    endpoint: http://store.test:8333\n    bucket: backups\n"
		},
		"secrets.yaml": func(string) string {
			return "credentials:\n  backup:\n    access_key: backup-access\n    secret_key: " + backupSecretKey + "\n"
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if incoming, patch := render1(render.Options{Env: off, Context: render.ContextManagement}, managementstate.State{SelfManaged: true, ReleasedCommit: released}); incoming != nil || strings.Contains(patch, released) {
		t.Errorf("backup.before_change false: incoming %v, the source's patch %s", incoming != nil, patch)
	}
}
