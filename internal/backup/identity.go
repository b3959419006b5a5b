package backup

import (
	"bytes"
	"fmt"

	"filippo.io/age"

	"cluster-init.dev/cluster-init/internal/boundedfile"
)

// ReadIdentities reads the age key that decrypts an environment's backups: the private half of a
// recipient of its values, kept off the cluster. A file that is not one is refused without
// quoting it (it may hold a key).
func ReadIdentities(path string) ([]age.Identity, error) {
	data, err := boundedfile.ReadFile(path, path, boundedfile.AgeKey)
	if err != nil {
		return nil, fmt.Errorf("the backup key %s: %w", path, err)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the backup key %s: not an age key file (expected lines AGE-SECRET-KEY-1...)", path)
	}
	return ids, nil
}
