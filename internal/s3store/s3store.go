// Package s3store is the batch bucket: the batch processor's reads and
// writes, and (through a small adapter in the local stack) the object store
// behind the local SFTP server (sftpd.ObjectStore). It does not import the
// SFTP server, so the Lambda functions do not link it.
//
// Missing objects are reported as errors wrapping fs.ErrNotExist, so callers
// branch with errors.Is whatever the backend (S3, LocalStack, fauxqs).
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/errkind"
)

// API is the subset of the S3 client the store uses.
type API interface {
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	CopyObject(context.Context, *s3.CopyObjectInput, ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	DeleteObjects(context.Context, *s3.DeleteObjectsInput, ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	CreateMultipartUpload(context.Context, *s3.CreateMultipartUploadInput, ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(context.Context, *s3.UploadPartInput, ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(context.Context, *s3.CompleteMultipartUploadInput, ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(context.Context, *s3.AbortMultipartUploadInput, ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

// Store is one bucket.
type Store struct {
	api    API
	bucket string
}

// New returns a store over bucket.
func New(api API, bucket string) *Store { return &Store{api: api, bucket: bucket} }

// Bucket is the bucket's name.
func (s *Store) Bucket() string { return s.bucket }

// Put stores body under key. A body larger than one part, or one that is
// not an io.ReadSeeker, goes through a Writer (a multipart upload), so no
// single call has to carry a large file within the SDK's per-call timeout.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64) (string, error) {
	rs, ok := body.(io.ReadSeeker)
	if !ok || size > DefaultPartSize {
		w := s.NewWriter(ctx, key)
		if _, err := io.Copy(w, body); err != nil {
			w.Abort()
			return "", err
		}
		if err := w.Close(); err != nil {
			return "", err
		}
		return w.ETag(), nil
	}
	out, err := s.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: rs, ContentLength: aws.Int64(size),
		ContentType: aws.String("text/plain; charset=utf-8"),
	})
	if err != nil {
		return "", s.wrap("put", key, err)
	}
	return CleanETag(aws.ToString(out.ETag)), nil
}

// PutBytes stores b under key.
func (s *Store) PutBytes(ctx context.Context, key string, b []byte) (string, error) {
	return s.Put(ctx, key, bytes.NewReader(b), int64(len(b)))
}

// Get streams the object (see GetRange).
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.GetRange(ctx, key, 0, "")
}

// ChunkSize is how many bytes one ranged GET of a reader fetches.
const ChunkSize = 1 << 20

// GetRange streams the object from byte offset to its end: the ranged read
// with which a continued run resumes. An offset at or beyond the end yields
// an empty body. With etag set the object must have that ETag, else
// a Conflict error; either way every chunk after the first must come from the
// same object version as the first.
//
// The reader fetches the object in ranged GETs of ChunkSize bytes, each
// read completely at once: memory stays bounded, however slowly the caller
// consumes the stream (rows are charged between reads), no call outlives the
// SDK's per-call timeout, and a broken connection costs one chunk's retry.
func (s *Store) GetRange(ctx context.Context, key string, offset int64, etag string) (io.ReadCloser, error) {
	r := &rangeReader{s: s, ctx: ctx, key: key, etag: etag, off: offset}
	if err := r.fill(); err != nil {
		return nil, err
	}
	return r, nil
}

type rangeReader struct {
	s    *Store
	ctx  context.Context
	key  string
	etag string
	off  int64 // next byte to fetch
	buf  []byte
	pos  int
	eof  bool // nothing left to fetch
}

func (r *rangeReader) fill() error {
	in := &s3.GetObjectInput{Bucket: &r.s.bucket, Key: &r.key,
		Range: aws.String("bytes=" + strconv.FormatInt(r.off, 10) + "-" + strconv.FormatInt(r.off+ChunkSize-1, 10))}
	if r.etag != "" {
		in.IfMatch = aws.String(quoteETag(r.etag))
	}
	out, err := r.s.api.GetObject(r.ctx, in)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange" {
			// Past the end (or an empty object): nothing more to read.
			r.eof, r.buf, r.pos = true, nil, 0
			return nil
		}
		return r.s.wrap("get", r.key, err)
	}
	defer out.Body.Close()
	if r.etag == "" {
		r.etag = CleanETag(aws.ToString(out.ETag))
	}
	if cap(r.buf) < ChunkSize {
		r.buf = make([]byte, ChunkSize)
	}
	n, err := io.ReadFull(out.Body, r.buf[:ChunkSize])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return r.s.wrap("get", r.key, err)
	}
	r.buf, r.pos = r.buf[:n], 0
	r.off += int64(n)
	total := int64(-1)
	if cr := aws.ToString(out.ContentRange); cr != "" { // "bytes 0-1048575/5000000"
		if i := strings.LastIndexByte(cr, '/'); i >= 0 {
			total, _ = strconv.ParseInt(cr[i+1:], 10, 64)
		}
	} else {
		total = r.off // a full response: the server ignored the range
	}
	if n < ChunkSize || (total >= 0 && r.off >= total) {
		r.eof = true
	}
	return nil
}

func (r *rangeReader) Read(p []byte) (int, error) {
	for r.pos >= len(r.buf) {
		if r.eof {
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.pos:])
	r.pos += n
	return n, nil
}

func (r *rangeReader) Close() error { r.buf, r.eof = nil, true; return nil }

// Head describes one object.
func (s *Store) Head(ctx context.Context, key string) (batch.Object, error) {
	out, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return batch.Object{}, s.wrap("head", key, err)
	}
	return batch.Object{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: CleanETag(aws.ToString(out.ETag)),
		LastModified: aws.ToTime(out.LastModified)}, nil
}

// Copy copies src to dst inside the bucket (server-side, up to 5 GB). With
// etag set the source must still have that ETag, else a Conflict error.
func (s *Store) Copy(ctx context.Context, src, dst, etag string) (string, error) {
	// CopySource is "bucket/key", URL-encoded; the slashes of the key stay.
	source := s.bucket + "/" + strings.ReplaceAll(url.PathEscape(src), "%2F", "/")
	in := &s3.CopyObjectInput{Bucket: &s.bucket, Key: &dst, CopySource: &source}
	if etag != "" {
		in.CopySourceIfMatch = aws.String(quoteETag(etag))
	}
	out, err := s.api.CopyObject(ctx, in)
	if err != nil {
		return "", s.wrap("copy", src, err)
	}
	if out.CopyObjectResult == nil {
		return "", nil
	}
	return CleanETag(aws.ToString(out.CopyObjectResult.ETag)), nil
}

// List returns every object whose key starts with prefix, in key order.
func (s *Store) List(ctx context.Context, prefix string) ([]batch.Object, error) {
	var out []batch.Object
	p := s3.NewListObjectsV2Paginator(s.api, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, batch.Object{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size),
				LastModified: aws.ToTime(o.LastModified), ETag: CleanETag(aws.ToString(o.ETag))})
		}
	}
	return out, nil
}

// Delete removes an object; a missing key is an error wrapping
// fs.ErrNotExist (S3 itself reports success, so the key is checked first).
func (s *Store) Delete(ctx context.Context, key string) error {
	if _, err := s.Head(ctx, key); err != nil {
		return err
	}
	return s.Remove(ctx, key)
}

// Remove deletes an object without checking that it exists (one call).
func (s *Store) Remove(ctx context.Context, key string) error {
	if _, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}); err != nil {
		return s.wrap("delete", key, err)
	}
	return nil
}

// RemoveAll deletes keys, 1000 per call; missing keys are not an error.
func (s *Store) RemoveAll(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		ids := make([]types.ObjectIdentifier, n)
		for i, k := range keys[:n] {
			ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := s.api.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &s.bucket,
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return s.wrap("delete", keys[0], err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("s3store: delete %s: %s", aws.ToString(e.Key), aws.ToString(e.Message))
		}
		keys = keys[n:]
	}
	return nil
}

// CleanETag removes the quotes S3 puts around ETags (S3 event
// notifications carry them without).
func CleanETag(etag string) string { return strings.Trim(etag, `"`) }

func quoteETag(etag string) string { return `"` + CleanETag(etag) + `"` }

// wrap answers in kinds (internal/errkind): a missing object is NotFound
// (and fs.ErrNotExist), a failed ETag precondition Conflict; each wraps
// S3's answer.
func (s *Store) wrap(op, key string, err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound", "404":
			return notExist(op, key, err)
		case "PreconditionFailed", "412":
			return errkind.Wrap(errkind.Conflict, fmt.Errorf("s3store: %s %s: %w", op, key, err), "object changed")
		}
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return notExist(op, key, err)
	}
	return fmt.Errorf("s3store: %s %s: %w", op, key, err)
}

func notExist(op, key string, err error) error {
	return errkind.Wrap(errkind.NotFound, fmt.Errorf("s3store: %s %s: %w (%w)", op, key, fs.ErrNotExist, err), "no such object")
}

// DefaultPartSize is the Writer's buffer: the part size of multipart uploads
// (S3's minimum part size is 5 MiB) and the largest object sent in one PUT.
const DefaultPartSize = 8 << 20

// Writer streams an object of unknown size into the bucket with memory
// bounded by its part size: one PUT when the whole object fits in one part,
// a multipart upload otherwise. Close completes the object; nothing is
// visible under the key before.
type Writer struct {
	s        *Store
	ctx      context.Context
	key      string
	partSize int
	buf      bytes.Buffer
	uploadID string
	parts    []types.CompletedPart
	etag     string
	err      error
	closed   bool
}

// NewWriter starts an object.
func (s *Store) NewWriter(ctx context.Context, key string) *Writer {
	return &Writer{s: s, ctx: ctx, key: key, partSize: DefaultPartSize}
}

// Write buffers p, uploading a part whenever the buffer is full.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, errors.New("s3store: write after close")
	}
	n := len(p)
	for len(p) > 0 {
		room := w.partSize - w.buf.Len()
		chunk := p[:min(room, len(p))]
		w.buf.Write(chunk)
		p = p[len(chunk):]
		if w.buf.Len() >= w.partSize {
			if err := w.flushPart(); err != nil {
				w.err = err
				return n - len(p), err
			}
		}
	}
	return n, nil
}

func (w *Writer) flushPart() error {
	if w.uploadID == "" {
		out, err := w.s.api.CreateMultipartUpload(w.ctx, &s3.CreateMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key,
			ContentType: aws.String("text/plain; charset=utf-8")})
		if err != nil {
			return w.s.wrap("create multipart upload", w.key, err)
		}
		w.uploadID = aws.ToString(out.UploadId)
	}
	num := int32(len(w.parts) + 1)
	out, err := w.s.api.UploadPart(w.ctx, &s3.UploadPartInput{Bucket: &w.s.bucket, Key: &w.key, UploadId: &w.uploadID,
		PartNumber: aws.Int32(num), Body: bytes.NewReader(w.buf.Bytes()), ContentLength: aws.Int64(int64(w.buf.Len()))})
	if err != nil {
		return w.s.wrap("upload part", w.key, err)
	}
	// Unquoted: S3 takes either form, and an XML-escaped quote (&#34;) is
	// more than some S3 implementations understand.
	w.parts = append(w.parts, types.CompletedPart{ETag: aws.String(CleanETag(aws.ToString(out.ETag))), PartNumber: aws.Int32(num)})
	w.buf.Reset()
	return nil
}

// Close writes what is buffered and completes the object.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		w.Abort()
		return w.err
	}
	if w.uploadID == "" {
		w.etag, w.err = w.s.Put(w.ctx, w.key, bytes.NewReader(w.buf.Bytes()), int64(w.buf.Len()))
		w.buf = bytes.Buffer{}
		return w.err
	}
	if w.buf.Len() > 0 {
		if err := w.flushPart(); err != nil {
			w.err = err
			w.Abort()
			return err
		}
	}
	out, err := w.s.api.CompleteMultipartUpload(w.ctx, &s3.CompleteMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key,
		UploadId: &w.uploadID, MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts}})
	if err != nil {
		w.err = w.s.wrap("complete multipart upload", w.key, err)
		w.Abort()
		return w.err
	}
	w.etag = CleanETag(aws.ToString(out.ETag))
	return nil
}

// Abort discards a multipart upload in progress (best effort; the bucket's
// lifecycle rule removes incomplete uploads anyway).
func (w *Writer) Abort() {
	w.closed = true
	if w.uploadID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 5*time.Second)
	defer cancel()
	_, _ = w.s.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key, UploadId: &w.uploadID})
	w.uploadID = ""
}

// ETag is the completed object's ETag.
func (w *Writer) ETag() string { return w.etag }

// NewClient is the S3 client of the batch bucket: path-style addressing when
// an endpoint is overridden (emulators), and no log line for every GET
// without a checksum to validate (ranged and emulator responses).
func NewClient(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, S3Options, func(o *s3.Options) {
		o.DisableLogOutputChecksumValidationSkipped = true
	})
}

// S3Options selects path-style addressing when an endpoint is overridden:
// emulators serve buckets on paths, not on virtual host names. It lives
// here, not in awsconfig, so that only functions that use S3 link its SDK.
func S3Options(o *s3.Options) {
	if os.Getenv("AWS_ENDPOINT_URL") != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || o.BaseEndpoint != nil {
		o.UsePathStyle = true
	}
}
