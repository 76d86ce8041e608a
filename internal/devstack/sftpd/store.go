package sftpd

import (
	"context"
	"io"
	"time"
)

// ObjectStore is the bucket behind the SFTP server, addressed by object key
// ("incoming/<merchantId>/<file>"). The S3 implementation lives elsewhere.
//
// Get and Delete return an error wrapping fs.ErrNotExist for a missing key,
// so the client is told "no such file" rather than a generic failure.
type ObjectStore interface {
	Put(ctx context.Context, key string, body io.Reader, size int64) (etag string, err error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// List returns every object whose key starts with prefix.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	Delete(ctx context.Context, key string) error
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
	ETag         string
}

// UploadEvent tells the OnUpload hook that a file has been stored: the local
// stack turns it into an S3 ObjectCreated event for the batch function.
type UploadEvent struct {
	Bucket     string
	Key        string
	Size       int64
	ETag       string
	MerchantID string
}
