package sftpd

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/pkg/sftp"
)

// upload spools one incoming file to a temporary file, so memory stays
// bounded whatever the file size and out-of-order writes (clients pipeline
// them) land where they belong. The object is stored only when the client
// closes the file after a complete transfer.
type upload struct {
	srv        *Server
	ctx        context.Context
	merchantID string
	key        string
	f          *os.File

	mu     sync.Mutex
	failed error // set when the transfer broke; the spool is then discarded
}

func (s *Server) newUpload(ctx context.Context, merchantID, key string) (*upload, error) {
	// The spool holds card data for the length of one upload; CreateTemp
	// makes it readable by this user only and Close always removes it.
	f, err := os.CreateTemp(s.cfg.SpoolDir, "sftp-upload-*")
	if err != nil {
		s.logger.Error("sftp spool", "err", err)
		return nil, sftp.ErrSSHFxFailure
	}
	return &upload{srv: s, ctx: ctx, merchantID: merchantID, key: key, f: f}, nil
}

var errTooLarge = errors.New("file exceeds the upload size limit")

func (u *upload) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > u.srv.cfg.MaxUploadSize {
		u.TransferError(errTooLarge)
		return 0, errTooLarge
	}
	return u.f.WriteAt(p, off)
}

// TransferError is called by pkg/sftp when the connection breaks with the
// file still open: a partial file must not be stored and processed.
func (u *upload) TransferError(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.failed == nil {
		u.failed = err
	}
}

// Close stores the spooled file and announces it.
func (u *upload) Close() error {
	defer os.Remove(u.f.Name())
	defer u.f.Close()

	u.mu.Lock()
	failed := u.failed
	u.mu.Unlock()
	if failed != nil {
		u.srv.logger.Warn("sftp upload discarded", "merchantId", u.merchantID, "key", u.key, "err", failed)
		return failed
	}
	fi, err := u.f.Stat()
	if err != nil {
		return u.srv.storeError("spool", u.key, err)
	}
	etag, err := u.srv.cfg.Store.Put(u.ctx, u.key, io.NewSectionReader(u.f, 0, fi.Size()), fi.Size())
	if err != nil {
		return u.srv.storeError("put", u.key, err)
	}
	ev := UploadEvent{Bucket: u.srv.cfg.Bucket, Key: u.key, Size: fi.Size(), ETag: etag, MerchantID: u.merchantID}
	u.srv.logger.Info("sftp upload stored", "merchantId", u.merchantID, "key", u.key, "size", fi.Size())
	u.srv.uploaded(ev)
	return nil
}

// streamReaderAt serves SFTP reads from one sequential object stream.
// Clients request consecutive chunks, but pkg/sftp hands them to several
// workers, so a later chunk can arrive before an earlier one: it waits
// briefly for its predecessors rather than skipping ahead. A read behind the
// stream (a client seeking back) re-opens the object.
type streamReaderAt struct {
	reopen func() (io.ReadCloser, error)

	mu       sync.Mutex
	rc       io.ReadCloser
	pos      int64
	eof      bool
	advanced chan struct{} // closed and replaced whenever pos moves
}

// waitAhead bounds how long an out-of-order read waits for earlier ones.
const waitAhead = 2 * time.Second

func newStreamReaderAt(rc io.ReadCloser, reopen func() (io.ReadCloser, error)) *streamReaderAt {
	return &streamReaderAt{rc: rc, reopen: reopen, advanced: make(chan struct{})}
}

func (s *streamReaderAt) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	deadline := time.Now().Add(waitAhead)
	for off > s.pos && !s.eof {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		advanced := s.advanced
		s.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-advanced:
		case <-timer.C:
		}
		timer.Stop()
		s.mu.Lock()
	}
	if s.eof && off >= s.pos {
		return 0, io.EOF
	}
	if off < s.pos {
		if err := s.restart(); err != nil {
			return 0, err
		}
	}
	if off > s.pos {
		if err := s.skip(off - s.pos); err != nil {
			return 0, err
		}
	}
	n, err := io.ReadFull(s.rc, p)
	s.eof = errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
	s.advance(int64(n))
	if s.eof {
		return n, io.EOF
	}
	return n, err
}

func (s *streamReaderAt) restart() error {
	s.rc.Close()
	rc, err := s.reopen()
	if err != nil {
		return err
	}
	s.rc, s.pos, s.eof = rc, 0, false
	return nil
}

func (s *streamReaderAt) skip(n int64) error {
	skipped, err := io.CopyN(io.Discard, s.rc, n)
	s.eof = errors.Is(err, io.EOF)
	s.advance(skipped)
	return err
}

// advance moves the position and wakes waiting reads, which may now proceed
// or, at the end of the stream, return io.EOF.
func (s *streamReaderAt) advance(n int64) {
	s.pos += n
	close(s.advanced)
	s.advanced = make(chan struct{})
}

func (s *streamReaderAt) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rc.Close()
}
