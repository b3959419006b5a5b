package standalone

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/age"

	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/secrets"
	"cluster-init.dev/cluster-init/internal/statedir"
)

// Key is the age identity the secrets of standalone states are encrypted to: the user's age key
// (--age-key-file, $SOPS_AGE_KEY_FILE, $SOPS_AGE_KEY: the key of the environments' secrets), else
// a key of cluster-init's own, kept outside every state directory so that a state that is copied
// or backed up never carries what decrypts it.
type Key struct {
	// Source says where the key is, for messages; never the key itself.
	Source     string
	identities []age.Identity
	recipients map[string]age.Recipient
}

// LoadKey returns the key given (user is the user's age key, nil if none), else cluster-init's
// own, created (0600) if create is set and there is none yet.
func LoadKey(user *secrets.Key, create bool) (*Key, error) {
	if user != nil {
		return parseKey(user.Source, user.Data())
	}
	path, err := statedir.StandaloneKeyFile()
	if err != nil {
		return nil, err
	}
	data, err := boundedfile.ReadFile(path, path, boundedfile.AgeKey)
	if errors.Is(err, os.ErrNotExist) && create {
		data, _, err = secrets.GenerateKey()
		if err == nil {
			err = atomicfile.Write(path, data, fileMode)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the age key of standalone states (%s): %w", path, err)
	}
	return parseKey(path, data)
}

func parseKey(source string, data []byte) (*Key, error) {
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err != nil {
		// The parser's message may quote the key.
		return nil, fmt.Errorf("%s: not an age key file (expected lines AGE-SECRET-KEY-1...)", source)
	}
	k := &Key{Source: source, identities: ids, recipients: map[string]age.Recipient{}}
	for _, id := range ids {
		if x, ok := id.(*age.X25519Identity); ok {
			k.recipients[x.Recipient().String()] = x.Recipient()
		}
	}
	if len(k.recipients) == 0 {
		return nil, fmt.Errorf("%s: no age X25519 identity in it", source)
	}
	return k, nil
}

// Recipient is the public key secrets are encrypted to (the first identity's).
func (k *Key) Recipient() string {
	for _, id := range k.identities {
		if x, ok := id.(*age.X25519Identity); ok {
			return x.Recipient().String()
		}
	}
	return ""
}

// Opens tells whether the key decrypts what was encrypted to recipient.
func (k *Key) Opens(recipient string) bool { _, ok := k.recipients[recipient]; return ok }

func (k *Key) seal(plain []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, k.recipients[k.Recipient()])
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(plain); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (k *Key) open(file string, sealed []byte) ([]byte, error) {
	r, err := age.Decrypt(bytes.NewReader(sealed), k.identities...)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot be decrypted with the age key %s: %w", file, k.Source, err)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: damaged: %w", file, err)
	}
	return plain, nil
}

// writeSealed writes data encrypted, as path + ".age".
func (k *Key) writeSealed(path string, plain []byte) error {
	sealed, err := k.seal(plain)
	if err != nil {
		return fmt.Errorf("encrypt %s: %w", filepath.Base(path), err)
	}
	return atomicfile.Write(path+sealedSuffix, sealed, fileMode)
}

// readFile reads a file of the state, decrypting it if it is sealed.
func (k *Key) readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, sealedSuffix) {
		return data, err
	}
	return k.open(path, data)
}
