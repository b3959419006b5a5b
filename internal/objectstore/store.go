// Package objectstore is the S3-compatible object store backups go to: an endpoint, a bucket and
// the credentials of the environment's secrets, through minio-go. Every wait has its context, a
// listing and a read are bounded, and no error carries the credentials.
package objectstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config says where the store is and how to reach it.
type Config struct {
	// Endpoint is the store's URL: http(s)://host[:port], without a path.
	Endpoint string
	Bucket   string
	Region   string
	// AccessKey and SecretKey are the credentials (from the environment's secrets).
	AccessKey, SecretKey string
	// CA, if set, is the PEM of the authority the store's certificate is checked against.
	CA []byte
}

// Store is one bucket of an object store.
type Store struct {
	client *minio.Client
	bucket string
	// host names the store in messages: its endpoint, never its credentials.
	host string
}

// Object is one object of the bucket, as a listing shows it.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

// MaxList bounds a listing: a bucket holding more objects under a prefix is refused, not read whole.
const MaxList = 100_000

// New returns the store of cfg; it does not reach it yet.
func New(cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil {
		return nil, fmt.Errorf("object store endpoint %q: expected http(s)://host[:port], with no path and no credentials in it", redactURL(cfg.Endpoint))
	}
	if cfg.Bucket == "" {
		return nil, errors.New("object store: no bucket named")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if len(cfg.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CA) {
			return nil, errors.New("object store: its CA is not a PEM certificate")
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    u.Scheme == "https",
		Region:    cfg.Region,
		Transport: transport,
		// Path-style: SeaweedFS, Ceph and most stores of a private cloud have no bucket DNS names.
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", u.Host, err)
	}
	return &Store{client: client, bucket: cfg.Bucket, host: u.Host}, nil
}

// String names the store for messages.
func (s *Store) String() string { return "bucket " + s.bucket + " of " + s.host }

// Put writes an object of size bytes from r (size -1: unknown), with metadata.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) error {
	if _, err := s.client.PutObject(ctx, s.bucket, key, r, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream", UserMetadata: meta}); err != nil {
		return s.fail("write "+key, err)
	}
	return nil
}

// List lists the objects under prefix, by key.
func (s *Store) List(ctx context.Context, prefix string) ([]Object, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []Object
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, s.fail("list "+prefix, o.Err)
		}
		if len(out) == MaxList {
			return nil, fmt.Errorf("list %s in %s: more than %d objects", prefix, s, MaxList)
		}
		out = append(out, Object{Key: o.Key, Size: o.Size, Modified: o.LastModified})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Get reads an object of at most limit bytes: a larger one is refused before it is read.
func (s *Store) Get(ctx context.Context, key string, limit int64) ([]byte, error) {
	o, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.fail("read "+key, err)
	}
	defer o.Close()
	info, err := o.Stat()
	if err != nil {
		return nil, s.fail("read "+key, err)
	}
	if info.Size > limit {
		return nil, fmt.Errorf("read %s from %s: %d bytes, more than %d", key, s, info.Size, limit)
	}
	data, err := io.ReadAll(io.LimitReader(o, limit+1))
	if err != nil {
		return nil, s.fail("read "+key, err)
	}
	if int64(len(data)) != info.Size {
		return nil, fmt.Errorf("read %s from %s: %d of its %d bytes", key, s, len(data), info.Size)
	}
	return data, nil
}

// Delete removes an object; one already gone is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return s.fail("delete "+key, err)
	}
	return nil
}

// IsNotFound tells whether err says an object or the bucket does not exist.
func IsNotFound(err error) bool {
	var e minio.ErrorResponse
	if errors.As(err, &e) {
		return e.StatusCode == http.StatusNotFound || e.Code == "NoSuchKey" || e.Code == "NoSuchBucket"
	}
	return false
}

// fail wraps a store's error with what was done and where, in the store's own words: minio-go's
// errors name the bucket and key, never the credentials.
func (s *Store) fail(what string, err error) error {
	var e minio.ErrorResponse
	if errors.As(err, &e) && e.Code != "" {
		return &storeError{what: what + " in " + s.String() + ": " + e.Code, err: err}
	}
	return fmt.Errorf("%s in %s: %w", what, s, err)
}

// storeError is a store's refusal: what was done, where, the store's code, then its message.
type storeError struct {
	what string
	err  error
}

func (e *storeError) Error() string { return e.what + ": " + e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// redactURL drops what an endpoint should not carry before it is shown.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		u.User = url.User("REDACTED")
		return u.String()
	}
	if i := strings.Index(raw, "@"); i >= 0 {
		return "…" + raw[i:]
	}
	return raw
}
