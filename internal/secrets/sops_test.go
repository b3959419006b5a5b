package secrets_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/secrets"
)

const plain = `# Secret values.
credentials:
  git:
    username: cluster-init
    password: s3cr3t-t0ken-value
`

func key(t *testing.T) (*secrets.Key, string) {
	t.Helper()
	data, pub, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := secrets.ParseKey("test.agekey", data)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Recipients(); len(got) != 1 || got[0] != pub {
		t.Fatalf("recipients %v, want %s", got, pub)
	}
	return k, pub
}

func TestEncryptDecrypt(t *testing.T) {
	k, pub := key(t)
	enc, err := secrets.Encrypt("secrets.yaml", []byte(plain), []string{pub})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(enc, []byte("s3cr3t-t0ken-value")) || !secrets.IsEncrypted(enc) || secrets.IsEncrypted([]byte(plain)) {
		t.Fatalf("not encrypted:\n%s", enc)
	}
	if r := secrets.Recipients(enc); len(r) != 1 || r[0] != pub {
		t.Errorf("recipients %v", r)
	}
	out, err := secrets.Decrypt("secrets.yaml", enc, k)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "password: s3cr3t-t0ken-value") {
		t.Errorf("decrypted:\n%s", out)
	}

	// Another key: refused, naming both recipients, never quoting the content.
	other, otherPub := key(t)
	_, err = secrets.Decrypt("environment-values/x/secrets.yaml", enc, other)
	if err == nil || !strings.Contains(err.Error(), "environment-values/x/secrets.yaml: cannot decrypt with the age key of test.agekey") ||
		!strings.Contains(err.Error(), otherPub) || !strings.Contains(err.Error(), pub) || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("wrong key: %v", err)
	}
	// No key.
	if _, err := secrets.Decrypt("s.yaml", enc, nil); err == nil || !strings.Contains(err.Error(), "give its age key") {
		t.Errorf("no key: %v", err)
	}
	// A value changed without SOPS: the integrity check fails.
	tampered := bytes.Replace(enc, []byte("username: ENC["), []byte("username: ENC[x"), 1)
	if _, err := secrets.Decrypt("s.yaml", tampered, k); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("tampered: %v", err)
	}
}

func TestParseKeyNeverQuotesTheKey(t *testing.T) {
	_, err := secrets.ParseKey("bad.agekey", []byte("AGE-SECRET-KEY-1NOTAKEYATALL"))
	if err == nil || strings.Contains(err.Error(), "NOTAKEY") {
		t.Errorf("%v", err)
	}
}

// A value written in clear into an encrypted file (an edit without SOPS) is named by its file,
// line and key: SOPS's own message quotes it, and it is a secret. So is a number in clear, which
// SOPS names by its type alone, and a value in a list.
func TestAValueInClearIsNamedNeverShown(t *testing.T) {
	k, pub := key(t)
	enc, err := secrets.Encrypt("secrets.yaml", []byte(plain+"  notifications:\n    receiver_token: abcdefabcdefabcdef\n  tenants:\n    - x\n"), []string{pub})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(enc), "\n")
	for _, c := range []struct {
		name, line, value, want string
	}{
		{"a string", "password: ", "pl41n-t3xt-s3cret", "secrets.yaml:5: credentials.git.password: not encrypted"},
		{"a number", "receiver_token: ", "31415926535897932", "secrets.yaml:7: credentials.notifications.receiver_token: not encrypted"},
		{"a list item", "- ", "l1st-cl34r-v4lue", "secrets.yaml:9: credentials.tenants[0]: not encrypted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			edited := slices.Clone(lines)
			found := false
			for i, l := range edited {
				if before, _, ok := strings.Cut(l, c.line+"ENC["); ok && strings.TrimSpace(before) == "" {
					edited[i], found = before+c.line+c.value, true
					break
				}
			}
			if !found {
				t.Fatalf("no line %q in:\n%s", c.line, enc)
			}
			_, err := secrets.Decrypt("secrets.yaml", []byte(strings.Join(edited, "\n")), k)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.value) {
				t.Errorf("got %v, want %q and not the value", err, c.want)
			}
		})
	}
}

// A plain file that is not YAML is refused by encrypt without quoting it.
func TestEncryptNeverQuotesAFileThatIsNotYAML(t *testing.T) {
	_, pub := key(t)
	_, err := secrets.Encrypt("secrets.yaml", []byte("credentials:\n  git:\n    password: \"s3cr3t-unclosed\n  x: [\n"), []string{pub})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("%v", err)
	}
}
