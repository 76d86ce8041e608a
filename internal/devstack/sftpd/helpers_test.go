package sftpd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/sftpuser"
)

// memStore is an in-memory ObjectStore for tests.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func newMemStore() *memStore { return &memStore{objects: map[string][]byte{}} }

func (m *memStore) Put(_ context.Context, key string, body io.Reader, size int64) (string, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return "", err
	}
	if int64(len(data)) != size {
		return "", fmt.Errorf("size %d, body %d bytes", size, len(data))
	}
	sum := md5.Sum(data)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = data
	return hex.EncodeToString(sum[:]), nil
}

func (m *memStore) Get(_ context.Context, key string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, fs.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (m *memStore) List(_ context.Context, prefix string) ([]ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ObjectInfo
	for k, v := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(v)), LastModified: time.Unix(1700000000, 0)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (m *memStore) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; !ok {
		return fs.ErrNotExist
	}
	delete(m.objects, key)
	return nil
}

func (m *memStore) get(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.objects[key]
	return v, ok
}

func (m *memStore) set(key string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = data
}

func (m *memStore) keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.objects {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type memUsers map[string]sftpuser.User

func (u memUsers) SFTPUser(_ context.Context, name string) (sftpuser.User, error) {
	if user, ok := u[name]; ok {
		return user, nil
	}
	return sftpuser.User{}, errkind.New(errkind.NotFound, "no such user", "")
}

const (
	bucket    = "payreq-batch-local"
	passwordA = "pw-merchant-A-0123"
	passwordB = "pw-merchant-B-4567"
)

// env is a running server with two merchants: A (password and key) and B
// (password only).
type env struct {
	t       *testing.T
	srv     *Server
	store   *memStore
	addr    string
	port    string
	keyPath string // merchant A's private key, OpenSSH format
	signer  ssh.Signer
	uploads chan UploadEvent
	logs    *syncBuffer
	served  chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newEnv(t *testing.T, tweak func(*Config)) *env {
	t.Helper()
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "merchant-a")
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, _ := ssh.NewPublicKey(pub)
	hashA, _ := sftpauth.HashPassword(passwordA)
	hashB, _ := sftpauth.HashPassword(passwordB)

	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	store := newMemStore()
	e := &env{t: t, store: store, keyPath: keyPath, signer: signer, uploads: make(chan UploadEvent, 16), logs: logs}
	cfg := Config{
		Auth: &sftpauth.Authenticator{
			Users: memUsers{
				"merchant_a": {MerchantID: "m_a", Username: "merchant_a", PasswordHash: hashA,
					PublicKeys: []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))}},
				"merchant_b": {MerchantID: "m_b", Username: "merchant_b", PasswordHash: hashB},
			},
			Attempts: &lockout.Counting{Store: &memCounters{m: map[string]lockout.Counter{}}},
			Bucket:   bucket,
			RoleARN:  "arn:aws:iam::000000000000:role/payreq-sftp-local",
			Logger:   logger,
		},
		Store:       store,
		Bucket:      bucket,
		HostKeyPath: filepath.Join(dir, "host", "ssh_host_ed25519_key"),
		SpoolDir:    filepath.Join(dir, "spool"),
		Logger:      logger,
		OnUpload:    func(_ context.Context, ev UploadEvent) { e.uploads <- ev },
	}
	if err := os.Mkdir(cfg.SpoolDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.srv, e.addr = srv, l.Addr().String()
	_, e.port, _ = net.SplitHostPort(e.addr)
	e.served = make(chan error, 1)
	go func() { e.served <- srv.Serve(context.Background(), l) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-e.served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return e
}

// upload waits for the OnUpload hook.
func (e *env) upload() UploadEvent {
	e.t.Helper()
	select {
	case ev := <-e.uploads:
		return ev
	case <-time.After(10 * time.Second):
		e.t.Fatal("no upload event")
		return UploadEvent{}
	}
}

func (e *env) noUpload() {
	e.t.Helper()
	select {
	case ev := <-e.uploads:
		e.t.Fatalf("unexpected upload event %+v", ev)
	case <-time.After(200 * time.Millisecond):
	}
}

// spoolEmpty checks that no spooled upload was left behind.
func (e *env) spoolEmpty() {
	e.t.Helper()
	left, _ := os.ReadDir(e.srv.cfg.SpoolDir)
	if len(left) != 0 {
		e.t.Errorf("spool files left behind: %v", left)
	}
}

var errCounterMoved = errkind.New(errkind.Conflict, "counter moved", "")

// memCounters are the password attempt counters of the fast suite (the
// local stack's DynamoDB is the dashboard suite's).
type memCounters struct {
	mu sync.Mutex
	m  map[string]lockout.Counter
}

func (s *memCounters) LoginAttempts(_ context.Context, key string) (lockout.Counter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.m[key]
	c.Key = key
	return c, nil
}

func (s *memCounters) PutLoginAttempts(_ context.Context, c *lockout.Counter, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[c.Key].Version != c.Version {
		return errCounterMoved
	}
	n := *c
	n.Version++
	s.m[c.Key] = n
	return nil
}
