package sftpd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/pkg/sftp"

	"github.com/payreq/payreq/internal/sftpauth"
)

// home is what one logged-in merchant can see: the logical directories of its
// identity-provider response, each backed by a key prefix of the bucket.
type home struct {
	merchantID string
	prefixes   map[string]string // "/incoming" → "incoming/<merchantId>/"
}

// newHome turns the identity provider's mappings into a home. Every target
// must lie in the server's bucket; anything else is a misconfiguration and
// the login is refused rather than served from somewhere unexpected.
func newHome(bucket string, mappings []sftpauth.Mapping) (*home, error) {
	h := &home{prefixes: make(map[string]string, len(mappings))}
	for _, m := range mappings {
		entry := path.Clean(m.Entry)
		key, ok := strings.CutPrefix(m.Target, "/"+bucket+"/")
		if !ok || key == "" || entry == "/" || strings.Count(entry, "/") != 1 || path.Clean("/"+key) != "/"+key {
			return nil, fmt.Errorf("sftpd: unusable home mapping %+v", m)
		}
		h.prefixes[entry] = key + "/"
		if entry == sftpauth.IncomingDir {
			h.merchantID = path.Base(key)
		}
	}
	if h.merchantID == "" {
		return nil, errors.New("sftpd: home has no " + sftpauth.IncomingDir + " directory")
	}
	return h, nil
}

// node is what a client path resolves to.
type node struct {
	kind  nodeKind
	entry string // logical directory ("/incoming") for dirs and files
	key   string // object key, for files
}

type nodeKind int

const (
	rootNode nodeKind = iota
	dirNode
	fileNode
)

var errDenied = sftp.ErrSSHFxPermissionDenied

// resolve maps a client path onto the home. Paths reach here cleaned and
// absolute (pkg/sftp resolves "..", so "/incoming/../../etc" arrives as
// "/etc"); everything outside the logical directories is permission denied,
// including subdirectories, which S3 prefixes would otherwise invent.
func (h *home) resolve(p string) (node, error) {
	p = path.Clean("/" + p)
	if p == "/" {
		return node{kind: rootNode}, nil
	}
	if _, ok := h.prefixes[p]; ok {
		return node{kind: dirNode, entry: p}, nil
	}
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	prefix, ok := h.prefixes[dir]
	if !ok || !validName(name) {
		return node{}, errDenied
	}
	return node{kind: fileNode, entry: dir, key: prefix + name}, nil
}

// validName accepts the names a merchant would give a batch file: no control
// characters, no dot-only names, at most 255 bytes (an S3 key component).
func validName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 255 {
		return false
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == '\\' {
			return false
		}
	}
	return true
}

// handler serves one SFTP session of a merchant.
type handler struct {
	srv  *Server
	home *home
}

func (h *handler) handlers() sftp.Handlers {
	return sftp.Handlers{FileGet: h, FilePut: h, FileCmd: h, FileList: h}
}

// Fileread streams a stored object to the client.
func (h *handler) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	n, err := h.home.resolve(r.Filepath)
	if err != nil {
		return nil, err
	}
	if n.kind != fileNode {
		return nil, sftp.ErrSSHFxFailure // a directory cannot be read as a file
	}
	// The request's context ends when the client closes the file or drops
	// the connection, which also ends any re-opened stream.
	ctx := r.Context()
	rc, err := h.srv.cfg.Store.Get(ctx, n.key)
	if err != nil {
		return nil, h.srv.storeError("get", n.key, err)
	}
	return newStreamReaderAt(rc, func() (io.ReadCloser, error) { return h.srv.cfg.Store.Get(ctx, n.key) }), nil
}

// Filewrite accepts uploads into /incoming only: results are written by the
// service, and the root holds nothing but the two directories.
func (h *handler) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	n, err := h.home.resolve(r.Filepath)
	if err != nil {
		return nil, err
	}
	if n.kind != fileNode || n.entry != sftpauth.IncomingDir {
		return nil, errDenied
	}
	if r.Pflags().Append {
		return nil, sftp.ErrSSHFxOpUnsupported // objects cannot be appended to
	}
	return h.srv.newUpload(r.Context(), h.home.merchantID, n.key)
}

// Filecmd allows removing result files and ignores attribute changes (many
// clients set the modification time after an upload and fail if refused).
// Renames, directories and links do not exist in the merchant's home.
func (h *handler) Filecmd(r *sftp.Request) error {
	n, err := h.home.resolve(r.Filepath)
	if err != nil {
		return err
	}
	switch r.Method {
	case "Setstat":
		return nil
	case "Remove":
		if n.kind != fileNode || n.entry != sftpauth.ResultsDir {
			return errDenied
		}
		if _, err := h.stat(r.Context(), n); err != nil {
			return err
		}
		if err := h.srv.cfg.Store.Delete(r.Context(), n.key); err != nil {
			return h.srv.storeError("delete", n.key, err)
		}
		h.srv.logger.Info("sftp remove", "merchantId", h.home.merchantID, "key", n.key)
		return nil
	default: // Rename, PosixRename, Mkdir, Rmdir, Symlink, Link
		return errDenied
	}
}

// Filelist lists directories and stats paths.
func (h *handler) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	n, err := h.home.resolve(r.Filepath)
	if err != nil {
		return nil, err
	}
	switch r.Method {
	case "List":
		return h.list(r.Context(), n)
	case "Stat":
		fi, err := h.stat(r.Context(), n)
		if err != nil {
			return nil, err
		}
		return listerAt{fi}, nil
	default: // Readlink: there are no links
		return nil, sftp.ErrSSHFxOpUnsupported
	}
}

func (h *handler) list(ctx context.Context, n node) (listerAt, error) {
	switch n.kind {
	case rootNode:
		out := make(listerAt, 0, len(h.home.prefixes))
		for entry := range h.home.prefixes {
			out = append(out, dirInfo(path.Base(entry)))
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
		return out, nil
	case dirNode:
		prefix := h.home.prefixes[n.entry]
		objs, err := h.srv.cfg.Store.List(ctx, prefix)
		if err != nil {
			return nil, h.srv.storeError("list", prefix, err)
		}
		out := make(listerAt, 0, len(objs))
		for _, o := range objs {
			name := strings.TrimPrefix(o.Key, prefix)
			if validName(name) && !strings.Contains(name, "/") {
				out = append(out, fileInfo{name: name, size: o.Size, mode: 0o644, mtime: o.LastModified})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
		return out, nil
	default: // a file name: not a directory, if it exists at all
		if _, err := h.stat(ctx, n); err != nil {
			return nil, err
		}
		return nil, sftp.ErrSSHFxFailure
	}
}

func (h *handler) stat(ctx context.Context, n node) (os.FileInfo, error) {
	switch n.kind {
	case rootNode:
		return dirInfo("/"), nil
	case dirNode:
		return dirInfo(path.Base(n.entry)), nil
	}
	objs, err := h.srv.cfg.Store.List(ctx, n.key)
	if err != nil {
		return nil, h.srv.storeError("stat", n.key, err)
	}
	for _, o := range objs {
		if o.Key == n.key {
			return fileInfo{name: path.Base(n.key), size: o.Size, mode: 0o644, mtime: o.LastModified}, nil
		}
	}
	return nil, os.ErrNotExist
}

// storeError logs a storage failure and gives the client a plain status: a
// missing object is "no such file", anything else a failure whose details
// (endpoints, request ids) stay in the server log.
func (s *Server) storeError(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return os.ErrNotExist
	}
	s.logger.Error("sftp storage error", "op", op, "key", key, "err", err)
	return sftp.ErrSSHFxFailure
}

// fileInfo is the os.FileInfo of an object or a logical directory.
type fileInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func dirInfo(name string) fileInfo { return fileInfo{name: name, mode: fs.ModeDir | 0o755} }

func (f fileInfo) Name() string       { return f.name }
func (f fileInfo) Size() int64        { return f.size }
func (f fileInfo) Mode() fs.FileMode  { return f.mode }
func (f fileInfo) ModTime() time.Time { return f.mtime }
func (f fileInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fileInfo) Sys() any           { return nil }

// listerAt serves a listing computed up front.
type listerAt []os.FileInfo

func (l listerAt) ListAt(dst []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(dst, l[off:])
	if n < len(dst) {
		return n, io.EOF
	}
	return n, nil
}
