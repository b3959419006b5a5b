// Package secrets encrypts and decrypts an environment's secrets file with SOPS and age, the way
// Flux's kustomize-controller decrypts it in the clusters (the same SOPS library and format): the
// CLI checks before anything is created that the file decrypts with the key given, and renders
// with its plaintext; the clusters decrypt it from git with the same key, kept in a Secret.
package secrets

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keys"
	"github.com/getsops/sops/v3/keyservice"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	yamlv3 "go.yaml.in/yaml/v3"

	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/redact"
)

// KeySecretKey is the key of the age identity in the Secret kustomize-controller reads it from
// (its name must end in .agekey).
const KeySecretKey = "age.agekey"

// Key is an age identity: what decrypts the secrets. It is never printed.
type Key struct {
	// Source says where it came from (a file name, an environment variable), for messages.
	Source     string
	data       string
	identities sopsage.ParsedIdentities
}

// Data is the key file's content, for the Secret the clusters decrypt with.
func (k *Key) Data() []byte { return []byte(k.data) }

// Recipients are the public keys of the identities.
func (k *Key) Recipients() []string {
	var out []string
	for _, id := range k.identities {
		if x, ok := id.(*age.X25519Identity); ok {
			out = append(out, x.Recipient().String())
		}
	}
	return out
}

// ParseKey reads age identities (a key file as age-keygen writes it).
func ParseKey(source string, data []byte) (*Key, error) {
	k := &Key{Source: source, data: string(data)}
	if err := k.identities.Import(string(data)); err != nil {
		// The parser's message may quote the key: say what is wrong without it.
		return nil, fmt.Errorf("%s: not an age key file (expected lines AGE-SECRET-KEY-1...)", source)
	}
	if len(k.identities) == 0 {
		return nil, fmt.Errorf("%s: no age identity in it", source)
	}
	return k, nil
}

// LoadKey reads the age key: the file given, else $SOPS_AGE_KEY_FILE, else $SOPS_AGE_KEY (the
// variables SOPS itself reads). It returns nil when none is given.
func LoadKey(path string) (*Key, error) {
	if path == "" {
		path = os.Getenv("SOPS_AGE_KEY_FILE")
	}
	if path != "" {
		data, err := boundedfile.ReadFile(path, path, boundedfile.AgeKey)
		if err != nil {
			return nil, fmt.Errorf("age key: %w", err)
		}
		return ParseKey(path, data)
	}
	if v := os.Getenv("SOPS_AGE_KEY"); v != "" {
		if err := boundedfile.AgeKey.CheckSize("$SOPS_AGE_KEY", []byte(v)); err != nil {
			return nil, fmt.Errorf("age key: %w", err)
		}
		return ParseKey("$SOPS_AGE_KEY", []byte(v))
	}
	return nil, nil
}

// GenerateKey makes a new age identity, as age-keygen writes it.
func GenerateKey() ([]byte, string, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, "", err
	}
	pub := id.Recipient().String()
	return []byte(fmt.Sprintf("# created: %s\n# public key: %s\n%s\n", time.Now().UTC().Format(time.RFC3339), pub, id)), pub, nil
}

// IsEncrypted tells whether a YAML document is a SOPS-encrypted file (it has SOPS's metadata).
func IsEncrypted(data []byte) bool {
	var doc struct {
		Sops map[string]any `yaml:"sops"`
	}
	return yamlv3.Unmarshal(data, &doc) == nil && doc.Sops["mac"] != nil
}

// store is the YAML store of SOPS, as kustomize-controller configures it.
func store() *sopsyaml.Store { return sopsyaml.NewStore(&config.YAMLStoreConfig{}) }

// Recipients are the age recipients a SOPS file is encrypted for.
func Recipients(data []byte) []string {
	tree, err := store().LoadEncryptedFile(data)
	if err != nil {
		return nil
	}
	var out []string
	for _, group := range tree.Metadata.KeyGroups {
		for _, k := range group {
			if a, ok := k.(*sopsage.MasterKey); ok {
				out = append(out, a.Recipient)
			}
		}
	}
	return out
}

// Decrypt decrypts a SOPS-encrypted YAML file with key and checks its integrity (MAC). file names
// the file in errors, which never quote its content: a value SOPS cannot decrypt (one written in
// clear) is named by its key and line.
func Decrypt(file string, data []byte, key *Key) ([]byte, error) {
	tree, err := store().LoadEncryptedFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not a SOPS-encrypted file: %s", file, redact.Quoted(err.Error()))
	}
	if key == nil {
		return nil, fmt.Errorf("%s is encrypted with SOPS for %s: give its age key (--age-key-file, or SOPS_AGE_KEY_FILE)",
			file, strings.Join(Recipients(data), ", "))
	}
	dataKey, err := dataKeyOf(tree, key)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot decrypt with the age key of %s (its recipient %s; the file is encrypted for %s)",
			file, key.Source, strings.Join(key.Recipients(), ", "), strings.Join(Recipients(data), ", "))
	}
	cipher := &pathRecorder{Cipher: aes.NewCipher()}
	mac, err := tree.Decrypt(dataKey, cipher)
	if err != nil {
		// SOPS's message quotes the value it could not decrypt: a value written in clear.
		return nil, notEncrypted(file, data, cipher.failed)
	}
	stored, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil {
		return nil, fmt.Errorf("%s: the integrity check (MAC) does not decrypt: the file was damaged or edited without SOPS", file)
	}
	if s, ok := stored.(string); !ok || subtle.ConstantTimeCompare([]byte(s), []byte(mac)) != 1 {
		return nil, fmt.Errorf("%s: the integrity check (MAC) fails: the file was edited without SOPS", file)
	}
	out, err := store().EmitPlainFile(tree.Branches)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", file, redact.Quoted(err.Error()))
	}
	return out, nil
}

// pathRecorder remembers where the last value that did not decrypt is (SOPS's path of it, the
// keys joined by ":"), which SOPS's own error does not say.
type pathRecorder struct {
	sops.Cipher
	failed string
}

func (c *pathRecorder) Decrypt(ciphertext string, key []byte, additionalData string) (any, error) {
	v, err := c.Cipher.Decrypt(ciphertext, key, additionalData)
	if err != nil {
		c.failed = additionalData
	}
	return v, err
}

// encryptedValue is the form of a value SOPS encrypted.
const encryptedValue = "ENC[AES256_GCM,"

// notEncrypted names the value of a SOPS file that does not decrypt: at path (SOPS's "a:b:",
// "" when SOPS tried none: a number or boolean in clear), else the first value that is not in
// SOPS's encrypted form. It names the file, line and key, never the value.
func notEncrypted(file string, data []byte, path string) error {
	var doc yamlv3.Node
	_ = yamlv3.Unmarshal(data, &doc)
	var want []string
	if path != "" {
		want = strings.Split(strings.TrimSuffix(path, ":"), ":")
	}
	if len(doc.Content) > 0 {
		if keys, line, ok := clearValue(doc.Content[0], nil, want); ok {
			return fmt.Errorf("%s:%d: %s: not encrypted (written in clear, or damaged): expected a value as SOPS encrypts it (%s...]); encrypt the file again with `bootstrap secrets encrypt` or sops (the value is not shown)",
				file, line, strings.Join(keys, "."), encryptedValue)
		}
	}
	return fmt.Errorf("%s: a value does not decrypt (written in clear, or damaged): encrypt the file again with `bootstrap secrets encrypt` or sops (the value is not shown)", file)
}

// clearValue finds, under n (at keys), the first scalar that is not in SOPS's encrypted form, on
// the path want when it is given (SOPS's paths have no list indexes), outside SOPS's metadata.
func clearValue(n *yamlv3.Node, keys, want []string) ([]string, int, bool) {
	switch n.Kind {
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if len(keys) == 0 && k == "sops" {
				continue
			}
			rest := want
			if len(want) > 0 {
				if want[0] != k {
					continue
				}
				rest = want[1:]
			}
			if found, line, ok := clearValue(n.Content[i+1], append(slices.Clone(keys), k), rest); ok {
				return found, line, true
			}
		}
	case yamlv3.SequenceNode:
		for i, item := range n.Content {
			at := slices.Clone(keys)
			if len(at) == 0 {
				at = []string{""}
			}
			at[len(at)-1] += fmt.Sprintf("[%d]", i)
			if found, line, ok := clearValue(item, at, want); ok {
				return found, line, true
			}
		}
	case yamlv3.ScalarNode:
		if len(want) == 0 && !strings.HasPrefix(n.Value, encryptedValue) {
			return keys, n.Line, true
		}
	}
	return nil, 0, false
}

// dataKeyOf decrypts the file's data key with the age identities, as kustomize-controller's key
// service does.
func dataKeyOf(tree sops.Tree, key *Key) ([]byte, error) {
	var errs []error
	for _, group := range tree.Metadata.KeyGroups {
		for _, k := range group {
			mk, ok := k.(*sopsage.MasterKey)
			if !ok {
				continue
			}
			mk = &sopsage.MasterKey{Recipient: mk.Recipient, EncryptedKey: mk.EncryptedKey}
			key.identities.ApplyToMasterKey(mk)
			dk, err := mk.Decrypt()
			if err == nil {
				return dk, nil
			}
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil, errors.New("the file has no age recipient")
	}
	return nil, errors.Join(errs...)
}

// Encrypt encrypts a plain YAML file with SOPS for the age recipients, as `sops --encrypt
// --age RECIPIENTS` does.
func Encrypt(file string, plain []byte, recipients []string) ([]byte, error) {
	if len(recipients) == 0 {
		return nil, fmt.Errorf("%s: no age recipient to encrypt for", file)
	}
	branches, err := store().LoadPlainFile(plain)
	if err != nil {
		// The parser's message may quote the plain secrets.
		return nil, fmt.Errorf("%s: not YAML: %s", file, redact.Quoted(err.Error()))
	}
	masters, err := sopsage.MasterKeysFromRecipients(strings.Join(recipients, ","))
	if err != nil {
		return nil, fmt.Errorf("age recipients: %v", err)
	}
	var group sops.KeyGroup
	for _, m := range masters {
		group = append(group, keys.MasterKey(m))
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{
		KeyGroups: []sops.KeyGroup{group}, UnencryptedSuffix: "_unencrypted", Version: sopsVersion(),
	}}
	dataKey, errs := tree.GenerateDataKeyWithKeyServices([]keyservice.KeyServiceClient{keyservice.NewLocalClient()})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %v", file, errors.Join(errs...))
	}
	cipher := aes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", file, redact.Quoted(err.Error()))
	}
	tree.Metadata.LastModified = time.Now().UTC()
	if tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, tree.Metadata.LastModified.Format(time.RFC3339)); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	out, err := store().EmitEncryptedFile(tree)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	return bytes.TrimLeft(out, "\n"), nil
}

// sopsVersion is the version of the SOPS library, which SOPS records in the files it encrypts.
func sopsVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/getsops/sops/v3" {
				return strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	return "3"
}
