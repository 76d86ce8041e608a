// Package memobjects is an in-memory batch bucket (batchproc.Objects) for
// fast tests: the batch processor without an S3 emulator. It keeps what
// the processor depends on of internal/s3store over S3: a missing object
// is an error wrapping fs.ErrNotExist, a copy or read whose ETag condition
// fails is a Conflict error, a ranged read at or past the end is empty,
// a read's later chunks must come from the object its first chunk came
// from, listings are in key order, deletes of missing keys succeed, and an
// object appears only once it is completely written. Like memstore it
// copies in and out and fails on purpose (Fail, CrashAfter).
package memobjects

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/testing/faults"
)

type object struct {
	data     []byte
	etag     string
	modified time.Time
}

// Store is one in-memory bucket. The zero value is not usable: New.
type Store struct {
	mu      sync.Mutex
	objects map[string]*object
	faults  faults.Plan
	// Now stamps LastModified (default time.Now); S3 keeps whole seconds.
	Now func() time.Time
}

// New returns an empty bucket.
func New() *Store {
	return &Store{objects: map[string]*object{}, Now: time.Now}
}

// Fail makes the next n-th call of method (1: the next one) return err
// before it changes anything.
func (s *Store) Fail(method string, n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Fail(method, n, err)
}

// CrashAfter makes the next n-th call of method do its work and then
// return err (the answer lost).
func (s *Store) CrashAfter(method string, n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.CrashAfter(method, n, err)
}

// Calls returns how many times method was called.
func (s *Store) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Calls(method)
}

// CallCounts returns the calls made of every method.
func (s *Store) CallCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Counts()
}

// begin counts a call of method (s.mu held).
func (s *Store) begin(method string) (before, after error) { return s.faults.Begin(method) }

func notExist(op, key string) error {
	return errkind.Wrap(errkind.NotFound, fmt.Errorf("memobjects: %s %s: %w", op, key, fs.ErrNotExist), "no such object")
}

func changed(op, key string) error {
	return errkind.New(errkind.Conflict, "memobjects: "+op+" "+key+": object changed", "")
}

// etagOf is S3's ETag of an object written in one PUT (MD5 of the bytes)
// or in parts of s3store.DefaultPartSize (MD5 of the parts' MD5s, "-parts").
func etagOf(b []byte) string {
	if len(b) <= s3store.DefaultPartSize {
		sum := md5.Sum(b)
		return hex.EncodeToString(sum[:])
	}
	var sums []byte
	n := 0
	for off := 0; off < len(b); off += s3store.DefaultPartSize {
		sum := md5.Sum(b[off:min(off+s3store.DefaultPartSize, len(b))])
		sums = append(sums, sum[:]...)
		n++
	}
	sum := md5.Sum(sums)
	return fmt.Sprintf("%s-%d", hex.EncodeToString(sum[:]), n)
}

// store writes b under key (s.mu held).
func (s *Store) store(key string, b []byte) string {
	o := &object{data: bytes.Clone(b), etag: etagOf(b), modified: s.Now().UTC().Truncate(time.Second)}
	s.objects[key] = o
	return o.etag
}

// Put stores what body yields under key; nothing is stored when reading it
// fails (the multipart upload is aborted), and that error is returned.
func (s *Store) Put(_ context.Context, key string, body io.Reader, _ int64) (string, error) {
	b, rerr := io.ReadAll(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("Put")
	if before != nil {
		return "", before
	}
	if rerr != nil {
		return "", rerr
	}
	etag := s.store(key, b)
	if after != nil {
		return "", after
	}
	return etag, nil
}

// PutBytes stores b under key.
func (s *Store) PutBytes(_ context.Context, key string, b []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("PutBytes")
	if before != nil {
		return "", before
	}
	etag := s.store(key, b)
	if after != nil {
		return "", after
	}
	return etag, nil
}

// Get streams the whole object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.getRange("Get", key, 0, "")
}

// GetRange streams key from byte offset on: empty at or past the end; with
// etag set the object must have it (else a Conflict error). Like the S3
// reader it reads in chunks, each from the object version of the first: a
// replaced object fails the read with a Conflict error, a deleted one with
// fs.ErrNotExist.
func (s *Store) GetRange(_ context.Context, key string, offset int64, etag string) (io.ReadCloser, error) {
	return s.getRange("GetRange", key, offset, etag)
}

func (s *Store) getRange(method, key string, offset int64, etag string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin(method)
	if before != nil {
		return nil, before
	}
	o, ok := s.objects[key]
	if !ok {
		return nil, notExist("get", key)
	}
	if etag != "" && s3store.CleanETag(etag) != o.etag {
		return nil, changed("get", key)
	}
	if after != nil {
		return nil, after
	}
	return &reader{s: s, key: key, etag: o.etag, off: offset}, nil
}

type reader struct {
	s    *Store
	key  string
	etag string
	off  int64
	buf  []byte
	eof  bool
}

func (r *reader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if r.eof {
			return 0, io.EOF
		}
		r.s.mu.Lock()
		o, ok := r.s.objects[r.key]
		switch {
		case !ok:
			r.s.mu.Unlock()
			return 0, notExist("get", r.key)
		case o.etag != r.etag:
			r.s.mu.Unlock()
			return 0, changed("get", r.key)
		}
		start := min(r.off, int64(len(o.data)))
		end := min(start+s3store.ChunkSize, int64(len(o.data)))
		r.buf = bytes.Clone(o.data[start:end])
		r.off = end
		r.eof = end >= int64(len(o.data))
		r.s.mu.Unlock()
		if len(r.buf) == 0 {
			return 0, io.EOF
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *reader) Close() error { r.buf, r.eof = nil, true; return nil }

func (o *object) info(key string) batch.Object {
	return batch.Object{Key: key, Size: int64(len(o.data)), LastModified: o.modified, ETag: o.etag}
}

// Head describes one object.
func (s *Store) Head(_ context.Context, key string) (batch.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("Head"); err != nil {
		return batch.Object{}, err
	}
	o, ok := s.objects[key]
	if !ok {
		return batch.Object{}, notExist("head", key)
	}
	return o.info(key), nil
}

// Copy copies src to dst; with etag set src must have it.
func (s *Store) Copy(_ context.Context, src, dst, etag string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("Copy")
	if before != nil {
		return "", before
	}
	o, ok := s.objects[src]
	if !ok {
		return "", notExist("copy", src)
	}
	if etag != "" && s3store.CleanETag(etag) != o.etag {
		return "", changed("copy", src)
	}
	// A copy in one call keeps a single-part ETag (MD5), as S3's does.
	c := &object{data: bytes.Clone(o.data), modified: s.Now().UTC().Truncate(time.Second)}
	sum := md5.Sum(c.data)
	c.etag = hex.EncodeToString(sum[:])
	s.objects[dst] = c
	if after != nil {
		return "", after
	}
	return c.etag, nil
}

// List returns the objects whose keys start with prefix, in key order.
func (s *Store) List(_ context.Context, prefix string) ([]batch.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("List"); err != nil {
		return nil, err
	}
	return s.list(prefix), nil
}

func (s *Store) list(prefix string) []batch.Object {
	var out []batch.Object
	for k, o := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, o.info(k))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Remove deletes key; a missing key is no error (S3's DeleteObject).
func (s *Store) Remove(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("Remove")
	if before != nil {
		return before
	}
	delete(s.objects, key)
	return after
}

// RemoveAll deletes keys; missing ones are no error.
func (s *Store) RemoveAll(_ context.Context, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("RemoveAll")
	if before != nil {
		return before
	}
	for _, k := range keys {
		delete(s.objects, k)
	}
	return after
}

// Object returns a copy of key's bytes (a test's look, not counted).
func (s *Store) Object(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, false
	}
	return bytes.Clone(o.data), true
}

// Keys lists the keys under prefix in order (a test's look, not counted).
func (s *Store) Keys(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for _, o := range s.list(prefix) {
		keys = append(keys, o.Key)
	}
	return keys
}
