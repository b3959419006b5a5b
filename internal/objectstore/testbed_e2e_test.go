//go:build e2e

package objectstore_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/objectstore"
)

// The test bed's own store (tools/testbed/s3: SeaweedFS's S3 gateway, which checks signatures):
// what this package does against gofakes3 it does against a real store, and a wrong secret is
// refused in the store's words, without the secret.
func TestTheTestBedsStore(t *testing.T) {
	cache := os.Getenv("CLUSTER_INIT_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "cluster-init")
	}
	data, err := os.ReadFile(filepath.Join(cache, "testbed-s3", "credentials"))
	if err != nil {
		t.Fatalf("the test bed's object store is not up (tools/testbed/s3 start): %v", err)
	}
	lines := strings.Fields(string(data))
	cfg := objectstore.Config{Endpoint: "http://127.0.0.1:8333", Bucket: "cluster-init-backups", Region: "us-east-1", AccessKey: lines[0], SecretKey: lines[1]}
	s, err := objectstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	key := "objectstore-test/" + t.Name()
	if err := s.Put(ctx, key, bytes.NewReader([]byte("hello")), 5, map[string]string{"environment": "test"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Delete(ctx, key) })
	if objs, err := s.List(ctx, "objectstore-test/"); err != nil || len(objs) != 1 || objs[0].Key != key || objs[0].Size != 5 {
		t.Errorf("list: %+v %v", objs, err)
	}
	if got, err := s.Get(ctx, key, 100); err != nil || string(got) != "hello" {
		t.Errorf("get: %q %v", got, err)
	}
	if _, err := s.Get(ctx, key+"-missing", 100); !objectstore.IsNotFound(err) {
		t.Errorf("a missing object: %v", err)
	}
	cfg.SecretKey = "wrong-secret-never-shown"
	bad, _ := objectstore.New(cfg)
	err = bad.Put(ctx, key+"-bad", bytes.NewReader([]byte("x")), 1, nil)
	if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") || strings.Contains(err.Error(), cfg.SecretKey) {
		t.Errorf("a wrong secret: %v", err)
	}
}
