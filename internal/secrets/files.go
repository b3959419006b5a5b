package secrets

import (
	"fmt"
	"os"
	"strings"

	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/boundedfile"
)

// WriteNewKey writes a new age key to path (mode 0600; a file there is refused, never replaced)
// and returns its public key.
func WriteNewKey(path string) (recipient string, err error) {
	data, pub, err := GenerateKey()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	return pub, f.Close()
}

// EncryptFile encrypts the secrets file at path (shown as display) in place for the recipients;
// a file encrypted already is refused. The file is replaced whole: a failure never leaves it
// half encrypted.
func EncryptFile(path, display string, recipients []string) error {
	data, err := boundedfile.ReadFile(path, display, boundedfile.Values)
	if err != nil {
		return err
	}
	if IsEncrypted(data) {
		return fmt.Errorf("%s is encrypted already (for %s)", display, strings.Join(Recipients(data), ", "))
	}
	enc, err := Encrypt(display, data, recipients)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, enc, 0o600)
}
