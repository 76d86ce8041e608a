package memobjects_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/memobjects"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var (
	_ batchproc.Objects = (*memobjects.Store)(nil)
	_ batchproc.Objects = (*s3store.Store)(nil)
)

// TestObjectsContract runs what the batch processor relies on of its
// bucket through the same assertions on the in-memory bucket and on
// s3store over the emulator's S3 (skipped under -short; make test runs it
// on both backends).
func TestObjectsContract(t *testing.T) {
	t.Run("memobjects", func(t *testing.T) { runContract(t, memobjects.New(), true) })
	t.Run("s3store", func(t *testing.T) {
		st := testenv.Stack(t)
		cfg, _ := testenv.CountingAWSConfig(t)
		// fauxqs ignores x-amz-copy-source-if-match; S3 answers 412
		// PreconditionFailed (docs/testing.md, fauxqs's differences).
		runContract(t, s3store.New(s3store.NewClient(cfg), st.Resources.Buckets["BatchBucket"]), false)
	})
}

var seq atomic.Int64

func is(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

func read(t *testing.T, what string, rc io.ReadCloser, err error) string {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("%s: read: %v", what, err)
	}
	return string(b)
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("the source failed")
	}
	k := min(f.n, len(p))
	for i := range k {
		p[i] = 'x'
	}
	f.n -= k
	return k, nil
}

// runContract: copyIfMatch is whether the backend honours a copy's ETag
// condition, as S3 does.
func runContract(t *testing.T, s batchproc.Objects, copyIfMatch bool) {
	ctx := context.Background()
	dir := fmt.Sprintf("work/contract-%d-%d/", time.Now().UnixNano(), seq.Add(1))
	content := "line one\nline two\nline three\n"
	sum := md5.Sum([]byte(content))

	etag, err := s.PutBytes(ctx, dir+"a", []byte(content))
	if err != nil || etag != hex.EncodeToString(sum[:]) {
		t.Fatalf("put: %q %v, want the content's MD5", etag, err)
	}
	info, err := s.Head(ctx, dir+"a")
	if err != nil || info.Key != dir+"a" || info.Size != int64(len(content)) || info.ETag != etag ||
		time.Since(info.LastModified) > time.Minute || info.LastModified.Nanosecond() != 0 {
		t.Fatalf("head: %+v %v", info, err)
	}

	// Missing objects.
	_, err = s.Head(ctx, dir+"none")
	is(t, "head of a missing key", err, fs.ErrNotExist)
	_, err = s.Get(ctx, dir+"none")
	is(t, "get of a missing key", err, fs.ErrNotExist)
	_, err = s.GetRange(ctx, dir+"none", 3, "")
	is(t, "ranged get of a missing key", err, fs.ErrNotExist)
	_, err = s.Copy(ctx, dir+"none", dir+"x", "")
	is(t, "copy of a missing key", err, fs.ErrNotExist)

	// Ranges.
	rc, err := s.Get(ctx, dir+"a")
	if got := read(t, "get", rc, err); got != content {
		t.Fatalf("get %q", got)
	}
	rc, err = s.GetRange(ctx, dir+"a", 9, "")
	if got := read(t, "range", rc, err); got != content[9:] {
		t.Fatalf("range from 9: %q", got)
	}
	rc, err = s.GetRange(ctx, dir+"a", 9, etag)
	if got := read(t, "range with its ETag", rc, err); got != content[9:] {
		t.Fatalf("range with its ETag: %q", got)
	}
	for _, off := range []int64{int64(len(content)), int64(len(content)) + 100} {
		rc, err = s.GetRange(ctx, dir+"a", off, "")
		if got := read(t, "range past the end", rc, err); got != "" {
			t.Fatalf("range from %d: %q, want empty", off, got)
		}
	}
	_, err = s.GetRange(ctx, dir+"a", 0, "0123456789abcdef0123456789abcdef")
	is(t, "range with another ETag", err, s3store.ErrChanged)

	// Copies.
	_, err = s.Copy(ctx, dir+"a", dir+"b", "0123456789abcdef0123456789abcdef")
	if copyIfMatch {
		is(t, "copy with another ETag", err, s3store.ErrChanged)
		if _, err := s.Head(ctx, dir+"b"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused copy wrote its target: %v", err)
		}
	} else if err == nil {
		t.Log("the emulator copied despite another ETag (S3 answers 412)")
		if err := s.Remove(ctx, dir+"b"); err != nil {
			t.Fatal(err)
		}
	}
	cetag, err := s.Copy(ctx, dir+"a", dir+"b", `"`+etag+`"`)
	if err != nil || cetag != etag {
		t.Fatalf("copy: %q %v, want ETag %s", cetag, err, etag)
	}
	rc, err = s.Get(ctx, dir+"b")
	if got := read(t, "copied", rc, err); got != content {
		t.Fatalf("copied %q", got)
	}

	// Streaming put: a body that is not a ReadSeeker; a failed body stores nothing.
	if _, err := s.Put(ctx, dir+"c", io.MultiReader(strings.NewReader("one\n"), strings.NewReader("two\n")), -1); err != nil {
		t.Fatal(err)
	}
	rc, err = s.Get(ctx, dir+"c")
	if got := read(t, "streamed", rc, err); got != "one\ntwo\n" {
		t.Fatalf("streamed %q", got)
	}
	if _, err := s.Put(ctx, dir+"d", &failingReader{n: 10}, -1); err == nil {
		t.Fatal("a failing body was stored")
	}
	_, err = s.Head(ctx, dir+"d")
	is(t, "the failed put's key", err, fs.ErrNotExist)

	// Listing in key order; deletes of missing keys succeed.
	objs, err := s.List(ctx, dir)
	if err != nil || len(objs) != 3 || objs[0].Key != dir+"a" || objs[1].Key != dir+"b" || objs[2].Key != dir+"c" ||
		objs[2].Size != 8 || objs[0].ETag != etag {
		t.Fatalf("list: %+v %v", objs, err)
	}
	if err := s.Remove(ctx, dir+"a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, dir+"a"); err != nil {
		t.Fatalf("remove of a missing key: %v", err)
	}
	_, err = s.Head(ctx, dir+"a")
	is(t, "removed", err, fs.ErrNotExist)
	if err := s.RemoveAll(ctx, []string{dir + "b", dir + "c", dir + "none"}); err != nil {
		t.Fatalf("remove all: %v", err)
	}
	if objs, err := s.List(ctx, dir); err != nil || len(objs) != 0 {
		t.Fatalf("after remove all: %+v %v", objs, err)
	}
}

// A read whose object is replaced or deleted after its first chunk fails,
// as s3store's later ranged GETs (If-Match the first's ETag) do.
func TestReadOfAReplacedObjectFails(t *testing.T) {
	s := memobjects.New()
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789\n"), s3store.ChunkSize/11+10)
	if _, err := s.PutBytes(ctx, "k", big); err != nil {
		t.Fatal(err)
	}
	rc, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, err := rc.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(ctx, "k", []byte("new")); err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	is(t, "read on after a replacement", err, s3store.ErrChanged)
}

func TestFaults(t *testing.T) {
	s := memobjects.New()
	ctx := context.Background()
	boom := errors.New("boom")
	s.Fail("PutBytes", 1, boom)
	if _, err := s.PutBytes(ctx, "k", []byte("x")); !errors.Is(err, boom) {
		t.Fatalf("failed put: %v", err)
	}
	if _, ok := s.Object("k"); ok {
		t.Fatal("a put failed before applying wrote")
	}
	s.CrashAfter("PutBytes", 1, boom)
	if _, err := s.PutBytes(ctx, "k", []byte("x")); !errors.Is(err, boom) {
		t.Fatalf("crashed put: %v", err)
	}
	if b, ok := s.Object("k"); !ok || string(b) != "x" {
		t.Fatal("a put failed after applying did not write")
	}
	if n := s.Calls("PutBytes"); n != 2 {
		t.Fatalf("%d calls counted, want 2", n)
	}
}
