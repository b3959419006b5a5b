package backupjob

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/objectstore"
	"cluster-init.dev/cluster-init/internal/values"
)

// Config is what the backup Job reads from the ConfigMap the chart renders of the values
// (names.BackupConfigMap, key names.BackupConfigKey, charts/cluster-init/templates/backup.yaml):
// the environment, its cluster, and the values' backup as they are.
type Config struct {
	Environment string                `json:"environment"`
	Cluster     string                `json:"cluster"`
	Backup      values.BackupSettings `json:"backup"`
}

// The files of the store's keys in the directory the Job mounts Secret names.BackupStoreSecret at.
const (
	AccessKeyFile = "access_key"
	SecretKeyFile = "secret_key"
)

// The files the Job is given, from a ConfigMap and a Secret: a ConfigMap holds at most 1 MiB.
var (
	configFile = boundedfile.Kind{Name: "the backup configuration", MaxBytes: 1 << 20, Why: "it is a ConfigMap's key"}
	keyFile    = boundedfile.Kind{Name: "a key of the object store", MaxBytes: 64 << 10, Why: "a store's key is a few dozen characters"}
)

// ReadConfig reads the Job's configuration file.
func ReadConfig(path string) (Config, error) {
	data, err := boundedfile.ReadFile(path, path, configFile)
	if err != nil {
		return Config{}, fmt.Errorf("read the backup configuration: %w", err)
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("read the backup configuration %s: %w", path, err)
	}
	if c.Environment == "" || c.Cluster == "" {
		return Config{}, fmt.Errorf("backup configuration %s: environment and cluster are expected", path)
	}
	return c, nil
}

// ParsedRecipients parses the age recipients of the values; each refusal names the entry.
func (c Config) ParsedRecipients() ([]age.Recipient, error) {
	if len(c.Backup.Recipients) == 0 {
		return nil, fmt.Errorf("backup.recipients: at least one age recipient (age1…) is expected")
	}
	var out []age.Recipient
	for i, r := range c.Backup.Recipients {
		rec, err := age.ParseX25519Recipient(strings.TrimSpace(r))
		if err != nil {
			return nil, fmt.Errorf("backup.recipients[%d]: not an age recipient (age1…): %w", i, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// RetentionRule is the values' retention.
func (c Config) RetentionRule() backup.Retention {
	r := c.Backup.Retention
	return backup.Retention{Keep: r.Keep, MaxAge: time.Duration(r.MaxAgeHours) * time.Hour}
}

// OpenStore connects to the values' store with the keys of the directory keysDir.
func (c Config) OpenStore(keysDir string) (*objectstore.Store, error) {
	read := func(name string) (string, error) {
		path := filepath.Join(keysDir, name)
		data, err := boundedfile.ReadFile(path, path, keyFile)
		if err != nil {
			return "", fmt.Errorf("read the store's key %s (credentials.backup.%s): %w", name, name, err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	access, err := read(AccessKeyFile)
	if err != nil {
		return nil, err
	}
	secret, err := read(SecretKeyFile)
	if err != nil {
		return nil, err
	}
	return OpenStore(c.Backup, values.BackupCredentials{AccessKey: access, SecretKey: secret})
}

// OpenStore connects to the store of the values with its keys.
func OpenStore(b values.BackupSettings, keys values.BackupCredentials) (*objectstore.Store, error) {
	if b.Store.Endpoint == "" || b.Store.Bucket == "" {
		return nil, fmt.Errorf("backup.store: endpoint and bucket are expected")
	}
	if keys.AccessKey == "" || keys.SecretKey == "" {
		return nil, fmt.Errorf("credentials.backup: access_key and secret_key are expected in the environment's secrets")
	}
	return objectstore.New(objectstore.Config{Endpoint: b.Store.Endpoint, Bucket: b.Store.Bucket, Region: b.Store.Region,
		AccessKey: keys.AccessKey, SecretKey: keys.SecretKey, CA: []byte(b.Store.CA)})
}
