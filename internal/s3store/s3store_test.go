package s3store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/errkind"
	. "github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newStore is the local stack's batch bucket with a fresh prefix.
func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	s := testenv.Stack(t)
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return New(NewClient(cfg), s.Resources.Buckets["BatchBucket"]), "test-" + hex.EncodeToString(b) + "/"
}

func readAll(t *testing.T, rc io.ReadCloser) string {
	t.Helper()
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPutGetListDelete(t *testing.T) {
	s, p := newStore(t)
	ctx := context.Background()
	etag, err := s.PutBytes(ctx, p+"a b+c.csv", []byte("hello"))
	if err != nil || etag == "" || strings.Contains(etag, `"`) {
		t.Fatalf("put: etag %q, %v", etag, err)
	}
	if _, err := s.PutBytes(ctx, p+"z.csv", nil); err != nil { // empty object
		t.Fatal(err)
	}
	if got := readAll(t, mustGet(t, s, p+"a b+c.csv")); got != "hello" {
		t.Errorf("get = %q", got)
	}
	if got := readAll(t, mustGet(t, s, p+"z.csv")); got != "" {
		t.Errorf("empty object = %q", got)
	}
	objs, err := s.List(ctx, p)
	if err != nil || len(objs) != 2 || objs[0].Key != p+"a b+c.csv" || objs[0].Size != 5 || objs[0].ETag != etag || objs[0].LastModified.IsZero() {
		t.Fatalf("list: %+v %v", objs, err)
	}
	info, err := s.Head(ctx, p+"a b+c.csv")
	if err != nil || info.Size != 5 || info.ETag != etag {
		t.Fatalf("head: %+v %v", info, err)
	}
	if err := s.Delete(ctx, p+"a b+c.csv"); err != nil {
		t.Fatal(err)
	}
	// The sftpd.ObjectStore contract: missing keys wrap fs.ErrNotExist.
	if _, err := s.Get(ctx, p+"a b+c.csv"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("get of a deleted key: %v", err)
	}
	if err := s.Delete(ctx, p+"a b+c.csv"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("delete of a missing key: %v", err)
	}
	if _, err := s.Head(ctx, p+"nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("head of a missing key: %v", err)
	}
	if err := s.RemoveAll(ctx, []string{p + "z.csv", p + "never-existed"}); err != nil {
		t.Fatal(err)
	}
	if objs, _ := s.List(ctx, p); len(objs) != 0 {
		t.Errorf("left: %+v", objs)
	}
}

func mustGet(t *testing.T, s *Store, key string) io.ReadCloser {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// Ranged reads continue at any byte, across chunk boundaries, and end
// cleanly at and beyond the end; a changed object is a Conflict error.
func TestGetRange(t *testing.T) {
	s, p := newStore(t)
	ctx := context.Background()
	data := make([]byte, 2*ChunkSize+12345)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	etag, err := s.PutBytes(ctx, p+"big", data)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, int64(len(data)) - 1, int64(len(data)), int64(len(data)) + 10} {
		rc, err := s.GetRange(ctx, p+"big", off, etag)
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		got := readAll(t, rc)
		want := ""
		if off < int64(len(data)) {
			want = string(data[off:])
		}
		if got != want {
			t.Errorf("offset %d: %d bytes, want %d", off, len(got), len(want))
		}
	}
	// Small reads through the chunks.
	rc, _ := s.GetRange(ctx, p+"big", 7, "")
	var buf bytes.Buffer
	small := make([]byte, 777)
	for {
		n, err := rc.Read(small)
		buf.Write(small[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if buf.String() != string(data[7:]) {
		t.Error("small reads differ")
	}
	if _, err := s.GetRange(ctx, p+"big", 0, "0123456789abcdef0123456789abcdef"); !errkind.Is(err, errkind.Conflict) {
		t.Errorf("wrong etag: %v", err)
	}
	if _, err := s.GetRange(ctx, p+"missing", 10, ""); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	// Copy is the processor's snapshot.
	if _, err := s.Copy(ctx, p+"big", p+"copy", etag); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, mustGet(t, s, p+"copy")); got != string(data) {
		t.Error("copy differs")
	}
	if _, err := s.Copy(ctx, p+"missing", p+"copy2", ""); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("copy of a missing key: %v", err)
	}
}

// The Writer stores small objects in one PUT and large ones as a multipart
// upload; Put of a large or unseekable body goes through it.
func TestWriter(t *testing.T) {
	s, p := newStore(t)
	ctx := context.Background()
	w := s.NewWriter(ctx, p+"small")
	io.WriteString(w, "one;")
	io.WriteString(w, "two\n")
	if err := w.Close(); err != nil || w.ETag() == "" {
		t.Fatalf("small: %v", err)
	}
	if got := readAll(t, mustGet(t, s, p+"small")); got != "one;two\n" {
		t.Errorf("small = %q", got)
	}

	w = s.NewWriter(ctx, p+"multi")
	SetPartSize(w, 5<<20) // S3's minimum part size
	want := strings.Repeat("0123456789", (11<<20)/10)
	for i := 0; i < len(want); i += 64 << 10 {
		if _, err := io.WriteString(w, want[i:min(i+64<<10, len(want))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if PartCount(w) != 3 || !strings.HasSuffix(w.ETag(), "-3") {
		t.Errorf("%d parts, etag %q", PartCount(w), w.ETag())
	}
	if got := readAll(t, mustGet(t, s, p+"multi")); got != want {
		t.Errorf("multipart object: %d bytes, want %d", len(got), len(want))
	}

	if _, err := s.Put(ctx, p+"unseekable", io.LimitReader(strings.NewReader(want), 1000), 1000); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, mustGet(t, s, p+"unseekable")); got != want[:1000] {
		t.Errorf("unseekable put = %d bytes", len(got))
	}
	if objs, _ := s.List(ctx, p+"nothing-yet"); len(objs) != 0 {
		t.Error("list of an empty prefix")
	}
}
