package objectstore_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"cluster-init.dev/cluster-init/internal/objectstore"
)

// startStore runs an S3 server in memory (gofakes3: S3's REST protocol, no signature checks; the
// test bed's SeaweedFS is the real store of the end-to-end tests) with a bucket.
func startStore(t *testing.T, bucket string) string {
	t.Helper()
	be := s3mem.New()
	if bucket != "" {
		if err := be.CreateBucket(bucket); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}

const secretKey = "s3-secret-key-never-shown"

func TestObjectsAreWrittenListedReadAndDeleted(t *testing.T) {
	url := startStore(t, "backups")
	s, err := objectstore.New(objectstore.Config{Endpoint: url, Bucket: "backups", Region: "us-east-1", AccessKey: "key", SecretKey: secretKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, k := range []string{"env/b", "env/a", "other/c"} {
		if err := s.Put(ctx, k, bytes.NewReader([]byte("data of "+k)), int64(len("data of "+k)), map[string]string{"environment": "env"}); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := s.List(ctx, "env/")
	if err != nil || len(objs) != 2 || objs[0].Key != "env/a" || objs[1].Key != "env/b" || objs[0].Size != int64(len("data of env/a")) {
		t.Fatalf("list env/: %+v %v", objs, err)
	}
	data, err := s.Get(ctx, "env/a", 1024)
	if err != nil || string(data) != "data of env/a" {
		t.Errorf("get: %q %v", data, err)
	}
	if _, err := s.Get(ctx, "env/a", 4); err == nil || !strings.Contains(err.Error(), "more than 4") {
		t.Errorf("an object past the limit: %v", err)
	}
	if _, err := s.Get(ctx, "env/missing", 1024); !objectstore.IsNotFound(err) {
		t.Errorf("a missing object: %v, want not found", err)
	}
	if err := s.Delete(ctx, "env/a"); err != nil {
		t.Fatal(err)
	}
	if objs, _ := s.List(ctx, "env/"); len(objs) != 1 {
		t.Errorf("after a delete: %+v", objs)
	}
	if err := s.Delete(ctx, "env/a"); err != nil {
		t.Errorf("deleting an object gone: %v", err)
	}
}

// What is wrong with a store is said with the store's name and never its credentials.
func TestAStoreThatFailsSaysWhereNotWithWhat(t *testing.T) {
	url := startStore(t, "")
	s, err := objectstore.New(objectstore.Config{Endpoint: url, Bucket: "missing", Region: "us-east-1", AccessKey: "key", SecretKey: secretKey})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Put(t.Context(), "env/x", bytes.NewReader([]byte("x")), 1, nil)
	if err == nil || !strings.Contains(err.Error(), "bucket missing of 127.0.0.1") || !strings.Contains(err.Error(), "NoSuchBucket") || strings.Contains(err.Error(), secretKey) {
		t.Errorf("a write to a bucket that does not exist: %v", err)
	}
	closed := httptest.NewServer(nil)
	closed.Close()
	s, _ = objectstore.New(objectstore.Config{Endpoint: closed.URL, Bucket: "b", AccessKey: "key", SecretKey: secretKey})
	if _, err := s.List(t.Context(), "env/"); err == nil || strings.Contains(err.Error(), secretKey) {
		t.Errorf("a store that does not answer: %v", err)
	}
	for _, bad := range []string{"s3.example", "ftp://s3.example", "http://user:pass@s3.example", "http://s3.example/bucket"} {
		_, err := objectstore.New(objectstore.Config{Endpoint: bad, Bucket: "b"})
		if err == nil || strings.Contains(err.Error(), "pass@") {
			t.Errorf("endpoint %q: %v", bad, err)
		}
	}
}
