package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/termtext"
)

const cloudsYAML = `clouds:
  openstack:
    auth:
      auth_url: https://keystone.example.invalid:5000/v3
      application_credential_id: ab1
      application_credential_secret: S3CRETpw
    region_name: RegionOne
    interface: public
    identity_api_version: 3
`

func TestEveryFormOfASecretIsHidden(t *testing.T) {
	r := New(cloudsYAML, "hunter2", "x9", `pa"ss\word`)
	jsonForm, _ := json.Marshal(map[string]string{"clouds.yaml": cloudsYAML})
	for name, text := range map[string]string{
		"verbatim":                 "error: " + cloudsYAML,
		"Go-quoted":                fmt.Sprintf("path %q not found", cloudsYAML),
		"JSON":                     string(jsonForm),
		"base64":                   "data: " + base64.StdEncoding.EncodeToString([]byte(cloudsYAML)),
		"reindented":               strings.ReplaceAll(cloudsYAML, "  ", "    "),
		"a line alone":             "got application_credential_secret: S3CRETpw here",
		"a value alone":            `{"application_credential_secret":"S3CRETpw"}`,
		"a short value alone":      `{"application_credential_id":"ab1"}`,
		"a short secret":           "token x9, again x9",
		"quote and backslash":      `value "pa\"ss\\word"`,
		"inside a word":            "xhunter2x",
		"a password in a URL user": "http://bob:hunter2@proxy:3128",
	} {
		got := r.String(text)
		for _, secret := range []string{"S3CRETpw", "hunter2", "ab1", "x9", "ss\\word", `ss\\word`} {
			if strings.Contains(got, secret) {
				t.Errorf("%s: %q still shows %q: %s", name, text, secret, got)
			}
		}
		if !strings.Contains(got, Mask) {
			t.Errorf("%s: nothing masked: %s", name, got)
		}
	}
}

// The printers escape what they print (termtext): a secret holding a tab or a newline is hidden
// in that form too, where the output's writer redacts it.
func TestASecretEscapedForATerminalIsHidden(t *testing.T) {
	r := New("tab\tS3CRETpw")
	if got := r.String(termtext.Line("the value: tab\tS3CRETpw")); strings.Contains(got, "S3CRETpw") {
		t.Errorf("the escaped secret is shown: %s", got)
	}
}

func TestOrdinaryTextIsLeftAlone(t *testing.T) {
	r := New(cloudsYAML, "x9")
	// Short secrets only where they stand alone; ordinary values of a multi-line secret
	// ("public", "3") are not credentials.
	for _, text := range []string{"ax9b is a word", "3 units ready, interface public", "cluster management"} {
		if got := r.String(text); got != text {
			t.Errorf("%q became %q", text, got)
		}
	}
}

func TestAgeKeysAreHiddenUnregistered(t *testing.T) {
	var r *Redactor
	got := r.String("key AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ1 end")
	if strings.Contains(got, "AGE-SECRET-KEY") {
		t.Errorf("age key shown: %s", got)
	}
}

func TestErrorsAndWriters(t *testing.T) {
	r := New()
	r.Add("hunter2") // added after the Redactor was handed out, as the CLI does
	base := fs.ErrNotExist
	err := r.Error(fmt.Errorf("read hunter2: %w", base))
	if strings.Contains(err.Error(), "hunter2") || !errors.Is(err, base) || !IsRedacted(err) {
		t.Errorf("error: %v (is ErrNotExist: %v)", err, errors.Is(err, base))
	}
	if r.Error(nil) != nil {
		t.Error("nil error became non-nil")
	}
	plain := errors.New("nothing secret")
	if r.Error(plain) != plain {
		t.Error("an error without secrets was replaced")
	}
	var buf bytes.Buffer
	n, werr := r.Writer(&buf).Write([]byte("password hunter2\n"))
	if werr != nil || n != len("password hunter2\n") || buf.String() != "password "+Mask+"\n" {
		t.Errorf("writer: %d %v %q", n, werr, buf.String())
	}
}

// Secrets that share characters are hidden whole, whichever comes first; lines of a multi-line
// secret that hold nothing (punctuation, comments, bare keys) do not mask ordinary output.
func TestOverlapsAndHarmlessLines(t *testing.T) {
	r := New("abcdXYZ1", "XYZ1234567", "---\n{\n# public key: age1pub\nclouds:\n  token: s3cr3t-value\n}\n")
	if got := r.String("x abcdXYZ1234567 y"); got != "x "+Mask+" y" {
		t.Errorf("overlapping secrets: %q", got)
	}
	for _, text := range []string{"---", `{"event":"log"}`, "encrypted for age1pub", "clouds: none"} {
		if got := r.String(text); got != text {
			t.Errorf("%q became %q", text, got)
		}
	}
	if got := r.String("token: s3cr3t-value"); strings.Contains(got, "s3cr3t") {
		t.Errorf("a secret line shows: %q", got)
	}
}
