package sftpd

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

func (e *env) dial(user string, auth ...ssh.AuthMethod) (*ssh.Client, error) {
	return ssh.Dial("tcp", e.addr, &ssh.ClientConfig{
		User:            user,
		Auth:            auth,
		HostKeyCallback: ssh.FixedHostKey(e.srv.HostKey()),
		Timeout:         10 * time.Second,
	})
}

func (e *env) client(user string, auth ...ssh.AuthMethod) *sftp.Client {
	e.t.Helper()
	conn, err := e.dial(user, auth...)
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := sftp.NewClient(conn)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close(); conn.Close() })
	return c
}

func TestGoClientUploadDownloadLargeFile(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client("merchant_a", ssh.PublicKeys(e.signer))

	// Several MiB, written with pkg/sftp's concurrent writes (out of order on
	// the wire), must arrive intact.
	data := make([]byte, 5<<20+123)
	rand.Read(data)
	f, err := c.Create("/incoming/big.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.store.get("incoming/m_a/big.csv"); !bytes.Equal(got, data) {
		t.Fatalf("stored %d bytes, want %d identical bytes", len(got), len(data))
	}
	if ev := e.upload(); ev.Size != int64(len(data)) || ev.MerchantID != "m_a" {
		t.Errorf("event %+v", ev)
	}

	// Downloads use concurrent reads too (WriteTo), served from one stream.
	e.store.set("results/m_a/big.result.csv", data)
	r, err := c.Open("/results/big.result.csv")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := r.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("downloaded %d bytes, want %d identical bytes", got.Len(), len(data))
	}

	fi, err := c.Stat("/results/big.result.csv")
	if err != nil || fi.Size() != int64(len(data)) || fi.IsDir() {
		t.Errorf("stat = %v, %v", fi, err)
	}
	entries, err := c.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		if !en.IsDir() {
			t.Errorf("%s is not a directory", en.Name())
		}
		names = append(names, en.Name())
	}
	if strings.Join(names, ",") != "incoming,results" {
		t.Errorf("root lists %v", names)
	}
	e.spoolEmpty()
}

func TestGoClientStatusCodes(t *testing.T) {
	e := newEnv(t, nil)
	e.store.set("incoming/m_a/mine.csv", []byte("x"))
	e.store.set("results/m_b/theirs.csv", []byte("b"))
	c := e.client("merchant_a", ssh.Password(passwordA))

	denied := map[string]error{}
	_, denied["open /etc/passwd"] = c.Open("/etc/passwd")
	_, denied["open ../../etc/passwd"] = c.Open("../../etc/passwd")
	_, denied["stat /etc"] = c.Stat("/etc")
	_, denied["readdir /etc"] = c.ReadDir("/etc")
	_, denied["open other merchant"] = c.Open("/" + bucket + "/results/m_b/theirs.csv")
	_, denied["create at root"] = c.Create("/x.csv")
	_, denied["create in results"] = c.Create("/results/x.csv")
	_, denied["create via .."] = c.Create("/incoming/../x.csv")
	denied["mkdir"] = c.Mkdir("/incoming/sub")
	denied["rmdir"] = c.RemoveDirectory("/incoming")
	denied["rename"] = c.Rename("/incoming/mine.csv", "/incoming/new.csv")
	denied["posix rename"] = c.PosixRename("/incoming/mine.csv", "/incoming/new.csv")
	denied["remove incoming"] = c.Remove("/incoming/mine.csv")
	denied["symlink"] = c.Symlink("/incoming/mine.csv", "/incoming/l.csv")
	for what, err := range denied {
		// pkg/sftp turns SSH_FX_PERMISSION_DENIED into fs.ErrPermission.
		if !errors.Is(err, fs.ErrPermission) {
			t.Errorf("%s: error %v, want permission denied", what, err)
		}
	}
	for what, err := range map[string]error{
		"open":               func() error { _, err := c.Open("/results/missing.csv"); return err }(),
		"remove":             c.Remove("/results/missing.csv"),
		"readdir of a file":  func() error { _, err := c.ReadDir("/results/m_b"); return err }(),
		"other merchant dir": func() error { _, err := c.ReadDir("/results/../../results/m_b"); return err }(),
	} {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want no such file", what, err)
		}
	}
	// Attribute changes (mtime after upload) are accepted and ignored.
	if err := c.Chtimes("/incoming/mine.csv", time.Now(), time.Now()); err != nil {
		t.Errorf("chtimes: %v", err)
	}
	if keys := e.store.keys(); strings.Join(keys, ",") != "incoming/m_a/mine.csv,results/m_b/theirs.csv" {
		t.Errorf("store changed: %v", keys)
	}
}

func TestEmptyPasswordIsNotAKeyLogin(t *testing.T) {
	e := newEnv(t, nil)
	// The identity provider answers an empty password with the user's keys;
	// that must not let a password login in.
	if _, err := e.dial("merchant_a", ssh.Password("")); err == nil {
		t.Fatal("empty password accepted")
	}
}

func TestBrokenUploadIsDiscarded(t *testing.T) {
	e := newEnv(t, nil)
	conn, err := e.dial("merchant_a", ssh.Password(passwordA))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sftp.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Create("/incoming/partial.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(batchFile)); err != nil {
		t.Fatal(err)
	}
	conn.Close() // connection lost with the file still open
	c.Close()

	e.noUpload()
	if keys := e.store.keys(); len(keys) != 0 {
		t.Errorf("a partial upload was stored: %v", keys)
	}
	waitFor(t, func() bool { left, _ := os.ReadDir(e.srv.cfg.SpoolDir); return len(left) == 0 })
}

func TestUploadSizeLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxUploadSize = 1000 })
	c := e.client("merchant_a", ssh.Password(passwordA))
	f, err := c.Create("/incoming/too-big.csv")
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.Write(make([]byte, 1001))
	cerr := f.Close()
	if werr == nil && cerr == nil {
		t.Fatal("oversized upload accepted")
	}
	e.noUpload()
	if keys := e.store.keys(); len(keys) != 0 {
		t.Errorf("stored %v", keys)
	}
	e.spoolEmpty()
}

func TestMaxConnections(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConns = 1 })
	first, err := e.dial("merchant_a", ssh.Password(passwordA))
	if err != nil {
		t.Fatal(err)
	}
	if second, err := e.dial("merchant_a", ssh.Password(passwordA)); err == nil {
		second.Close()
		t.Fatal("second connection accepted beyond MaxConns=1")
	}
	first.Close()
	waitFor(t, func() bool {
		c, err := e.dial("merchant_a", ssh.Password(passwordA))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func TestIdleTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	c := e.client("merchant_a", ssh.Password(passwordA))
	if _, err := c.ReadDir("/"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := c.ReadDir("/"); err == nil {
		t.Fatal("idle connection still open")
	}
}

func TestLoginTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.LoginTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	// Never start the handshake: the server must hang up on its own.
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("connection not closed by the server: %v", err)
	}
}

func TestShellAndForwardingRefused(t *testing.T) {
	e := newEnv(t, nil)
	conn, err := e.dial("merchant_a", ssh.Password(passwordA))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Run("cat /etc/passwd"); err == nil {
		t.Error("exec accepted")
	}
	if _, err := conn.Dial("tcp", "127.0.0.1:22"); err == nil {
		t.Error("port forwarding accepted")
	}
}

func TestHostKeyPersists(t *testing.T) {
	e := newEnv(t, nil)
	fi, err := os.Stat(e.srv.cfg.HostKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("host key mode %v, want 0600", fi.Mode().Perm())
	}
	if e.srv.HostKey().Type() != ssh.KeyAlgoED25519 {
		t.Errorf("host key type %s", e.srv.HostKey().Type())
	}
	cfg := e.srv.cfg
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.HostKey().Marshal(), e.srv.HostKey().Marshal()) {
		t.Error("host key changed across restarts")
	}

	// Concurrent first starts agree on one key.
	cfg.HostKeyPath = filepath.Join(t.TempDir(), "k")
	var wg sync.WaitGroup
	keys := make([]string, 4)
	for i := range keys {
		wg.Go(func() {
			s, err := New(cfg)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = string(s.HostKey().Marshal())
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if k != keys[0] {
			t.Error("concurrent starts created different host keys")
		}
	}
}

func TestShutdownWaitsForSessions(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client("merchant_a", ssh.Password(passwordA))
	f, err := c.Create("/incoming/during-shutdown.csv")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- e.srv.Shutdown(ctx)
	}()
	waitFor(t, func() bool { _, err := net.Dial("tcp", e.addr); return err != nil })
	// The open session still completes its upload.
	if _, err := f.Write([]byte(batchFile)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	e.upload()
	start := time.Now()
	c.Close() // ends the session; the SSH connection itself stays open
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("Shutdown returned %v after the last session ended", waited)
	}
}

func TestShutdownGivesUp(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client("merchant_a", ssh.Password(passwordA))
	if _, err := c.Create("/incoming/stuck.csv"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := e.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded", err)
	}
	if _, err := c.ReadDir("/"); err == nil {
		t.Error("session still served after Shutdown gave up")
	}
	e.noUpload()
}

func TestStreamReaderAtOutOfOrder(t *testing.T) {
	data := make([]byte, 1<<20+7)
	rand.Read(data)
	opens := 0
	open := func() (io.ReadCloser, error) { opens++; return io.NopCloser(bytes.NewReader(data)), nil }
	rc, _ := open()
	s := newStreamReaderAt(rc, open)

	const chunk = 32 << 10
	offsets := make([]int64, 0, len(data)/chunk+3)
	for off := int64(0); off < int64(len(data))+2*chunk; off += chunk {
		offsets = append(offsets, off)
	}
	// Requests arrive in reverse order within windows of eight, like
	// pipelined reads picked up by several workers.
	got := make([]byte, len(data))
	var wg sync.WaitGroup
	for i := 0; i < len(offsets); i += 8 {
		window := offsets[i:min(i+8, len(offsets))]
		sort.Slice(window, func(a, b int) bool { return window[a] > window[b] })
		for _, off := range window {
			wg.Go(func() {
				buf := make([]byte, chunk)
				n, err := s.ReadAt(buf, off)
				if err != nil && err != io.EOF {
					t.Errorf("ReadAt(%d): %v", off, err)
				}
				if n > 0 {
					copy(got[off:], buf[:n])
				}
			})
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data differs")
	}
	if opens != 1 {
		t.Errorf("object opened %d times, want 1 (no seeking back)", opens)
	}
	// Seeking back re-opens the object.
	buf := make([]byte, 10)
	if n, err := s.ReadAt(buf, 5); n != 10 || err != nil || !bytes.Equal(buf, data[5:15]) {
		t.Errorf("ReadAt back = %d, %v", n, err)
	}
	if opens != 2 {
		t.Errorf("opens = %d, want 2", opens)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
