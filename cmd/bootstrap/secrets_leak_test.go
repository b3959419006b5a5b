package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/redact"
	"cluster-init.dev/cluster-init/internal/secrets"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The planted secrets: a long one and a short one in a clouds.yaml, and a proxy password in a
// values file (not a credential key, but a credential all the same).
const (
	plantedLong  = "S3CRETpw-planted"
	plantedShort = "ab1"
	plantedProxy = "hunter2proxy"
)

// copyEnvironment copies environment-values/NAME into a temporary directory, each file passed
// through edit, and returns the copy's path.
func copyEnvironment(t *testing.T, name string, edit func(file string, data []byte) []byte) string {
	t.Helper()
	src := filepath.Join(testenv.Checkout(t), "environment-values", name)
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"kustomization.yaml", "values.yaml", "secrets.yaml"} {
		data, err := os.ReadFile(filepath.Join(src, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), edit(file, data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// plantedEnvironment is environment-values/kubeadm-capo with the planted secrets in its secrets
// file.
func plantedEnvironment(t *testing.T) string {
	t.Helper()
	return copyEnvironment(t, "kubeadm-capo", func(file string, data []byte) []byte {
		if file != "secrets.yaml" {
			return data
		}
		text := strings.Replace(string(data), "application_credential_secret: FILL-IN", "application_credential_secret: "+plantedLong, 1)
		text = strings.Replace(text, "application_credential_id: FILL-IN", "application_credential_id: "+plantedShort, 1)
		if !strings.Contains(text, plantedLong) || !strings.Contains(text, plantedShort) {
			t.Fatalf("the secrets were not planted in %s", file)
		}
		return []byte(text)
	})
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func assertNoSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{plantedLong, plantedShort, plantedProxy} {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, text)
		}
	}
}

// Every way the CLI reports bad input hides the environment's secrets: schema errors of any
// layer, template errors that print a credential, templated paths, kustomize errors, the JSON
// event stream, and render without --show-secrets. Each case must fail (or print) with the
// secret in hand, so that a missing redaction shows.
func TestNoErrorPathShowsASecret(t *testing.T) {
	env := plantedEnvironment(t)
	dir := t.TempDir()
	proxy := "proxies:\n  http_proxy: http://bob:" + plantedProxy + "@proxy.example:3128\n"
	cases := []struct {
		name   string
		values string
		args   []string
	}{
		{"a schema error of another key", proxy + "cluster:\n  workers:\n    replicas: many\n", nil},
		{"a template that fails with a credential", "units:\n  capi:\n    kustomization_spec:\n      path: \"{{ .Values.credentials.openstack.clouds_yaml | fail }}\"\n", nil},
		{"a templated path that is a credential", "units:\n  capi:\n    kustomization_spec:\n      path: \"{{ .Values.credentials.openstack.clouds_yaml }}\"\n", nil},
		{"a credential as JSON in a path", "units:\n  capi:\n    kustomization_spec:\n      path: \"{{ .Values.credentials.openstack.clouds_yaml | toJson }}\"\n", nil},
		{"a kustomize error quoting a patch", "units:\n  capi:\n    kustomization_spec:\n      patches:\n        - patch: \"{{ .Values.credentials.openstack.clouds_yaml }}\"\n", nil},
		{"a proxy password in a templated path", proxy + "units:\n  capi:\n    kustomization_spec:\n      path: \"{{ .Values.proxies.http_proxy }}\"\n", nil},
		{"the JSON event stream of bootstrap", "units:\n  capi:\n    kustomization_spec:\n      path: \"{{ .Values.credentials.openstack.clouds_yaml }}\"\n", []string{"--output", "json", "--until", "validate"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			values := writeFile(t, dir, "values-"+string(rune('a'+i))+".yaml", c.values)
			args := append([]string{"validate", env, "--values", values}, c.args...)
			if len(c.args) > 0 {
				args = append([]string{env, "--values", values}, c.args...)
			}
			out, err := run(t, args...)
			if err == nil {
				t.Fatalf("no error:\n%s", out)
			}
			if !redact.IsRedacted(err) && !strings.Contains(c.name, "schema error") {
				t.Errorf("the error did not need hiding anything: the case does not reach a secret: %v", err)
			}
			assertNoSecret(t, "the error", err.Error())
			assertNoSecret(t, "the output", out)
			if len(c.args) > 0 {
				assertJSONLines(t, out)
			}
		})
	}

	t.Run("render", func(t *testing.T) {
		values := writeFile(t, dir, "proxy.yaml", proxy)
		out, err := run(t, "render", env, "--values", values)
		if err != nil {
			t.Fatal(err)
		}
		assertNoSecret(t, "render", out)
		if !strings.Contains(out, "http_proxy: "+redact.Mask) {
			t.Errorf("render does not show the masked proxy")
		}
		out, err = run(t, "render", env, "--values", values, "--show-secrets")
		if err != nil || !strings.Contains(out, plantedProxy) || !strings.Contains(out, plantedLong) {
			t.Errorf("render --show-secrets hides the secrets: %v", err)
		}
	})
}

// assertJSONLines checks that out is JSON events only, ending with the summary.
func assertJSONLines(t *testing.T, out string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var last map[string]any
	n := 0
	for sc.Scan() {
		last = nil
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("line %d of --output json is not JSON: %q", n+1, sc.Text())
		}
		n++
	}
	if n == 0 || last["event"] != "summary" || last["error"] == "" || last["error"] == nil {
		t.Errorf("the stream does not end with a summary carrying the error: %v", last)
	}
}

// A SOPS-encrypted secrets file with one value written in clear (an edit without SOPS): the
// value is a secret that no redactor knows yet (nothing decrypted), so the message names its
// file, line and key, and never shows it; so do validate and bootstrap.
func TestAValueInClearOfAnEncryptedFileIsNeverShown(t *testing.T) {
	const clear = "cl34r-t3xt-s3cret-value"
	keyData, pub, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := writeFile(t, t.TempDir(), "env.agekey", string(keyData))
	env := copyEnvironment(t, "kubeadm-capd", func(file string, data []byte) []byte {
		if file != "secrets.yaml" {
			return data
		}
		enc, err := secrets.Encrypt(file, []byte("credentials:\n  git:\n    username: bot\n    password: planted\n"), []string{pub})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(enc), "\n")
		for i, l := range lines {
			if before, _, ok := strings.Cut(l, "password: ENC["); ok {
				lines[i] = before + "password: " + clear
			}
		}
		return []byte(strings.Join(lines, "\n"))
	})
	for _, args := range [][]string{
		{"validate", env, "--age-key-file", keyFile},
		{env, "--age-key-file", keyFile, "--until", "validate", "--output", "json"},
	} {
		out, err := run(t, args...)
		if err == nil {
			t.Fatalf("%v accepted it", args)
		}
		if strings.Contains(err.Error(), clear) || strings.Contains(out, clear) {
			t.Errorf("%v shows the value in clear:\n%v\n%s", args, err, out)
		}
		if !strings.Contains(err.Error(), "secrets.yaml:4: credentials.git.password: not encrypted") {
			t.Errorf("%v does not name the file, line and key:\n%v", args, err)
		}
	}
}
