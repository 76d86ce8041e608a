// Package sftpd is the SFTP server of the local stack: the stand-in for AWS
// Transfer Family. Merchants log in with the same credentials (through the
// same sftpauth.Authenticator), see the same logical home (/incoming and
// /results) and their uploads land in the object store exactly where
// Transfer Family would put them.
package sftpd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/payreq/payreq/internal/sftpauth"
)

// Authenticator decides logins; *sftpauth.Authenticator is the one used.
type Authenticator interface {
	Authenticate(ctx context.Context, ev sftpauth.Event) (sftpauth.Response, error)
}

// Config configures a Server. Auth, Store, Bucket and HostKeyPath are required.
type Config struct {
	Auth        Authenticator
	Store       ObjectStore
	Bucket      string // the bucket the home mappings point into
	HostKeyPath string // ed25519 host key, created on first start

	// OnUpload is called, in its own goroutine, after each stored upload.
	OnUpload func(context.Context, UploadEvent)

	Logger         *slog.Logger
	ServerID       string        // serverId reported to Auth (default "local")
	MaxConns       int           // concurrent connections (default 32)
	MaxSessions    int           // SFTP sessions per connection (default 4)
	LoginTimeout   time.Duration // handshake and authentication (default 30 s)
	IdleTimeout    time.Duration // no traffic at all (default 10 min)
	MaxUploadSize  int64         // bytes per file (default 1 GiB)
	SpoolDir       string        // where uploads are spooled (default os.TempDir())
	AuthTimeout    time.Duration // one call to Auth (default 10 s)
	ShutdownPeriod time.Duration // how long Close lets running hooks finish (default 30 s)
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ServerID == "" {
		c.ServerID = "local"
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 32
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = 4
	}
	if c.LoginTimeout <= 0 {
		c.LoginTimeout = 30 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 10 * time.Minute
	}
	if c.MaxUploadSize <= 0 {
		c.MaxUploadSize = 1 << 30
	}
	if c.SpoolDir == "" {
		c.SpoolDir = os.TempDir()
	}
	if c.AuthTimeout <= 0 {
		c.AuthTimeout = 10 * time.Second
	}
	if c.ShutdownPeriod <= 0 {
		c.ShutdownPeriod = 30 * time.Second
	}
}

// ErrServerClosed is returned by Serve after Close or Shutdown.
var ErrServerClosed = errors.New("sftpd: server closed")

// Server is an SFTP server. Create it with New.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	ssh     *ssh.ServerConfig
	slots   chan struct{} // one per allowed concurrent connection
	baseCtx context.Context
	cancel  context.CancelFunc

	hostKey ssh.PublicKey

	mu        sync.Mutex
	stopping  bool // no new listeners or connections (Shutdown or Close)
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	connsDone sync.WaitGroup // connection handlers
	sessions  atomic.Int64   // SFTP sessions being served
	hooks     sync.WaitGroup // OnUpload calls
}

// New checks cfg and loads (or creates) the host key.
func New(cfg Config) (*Server, error) {
	if cfg.Auth == nil || cfg.Store == nil || cfg.Bucket == "" || cfg.HostKeyPath == "" {
		return nil, errors.New("sftpd: Auth, Store, Bucket and HostKeyPath are required")
	}
	cfg.setDefaults()
	hostKey, err := loadOrCreateHostKey(cfg.HostKeyPath)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:       cfg,
		logger:    cfg.Logger,
		slots:     make(chan struct{}, cfg.MaxConns),
		baseCtx:   ctx,
		cancel:    cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]struct{}{},
		hostKey:   hostKey.PublicKey(),
	}
	s.ssh = &ssh.ServerConfig{
		PasswordCallback:  s.passwordLogin,
		PublicKeyCallback: s.publicKeyLogin,
		MaxAuthTries:      6,
		ServerVersion:     "SSH-2.0-payreq-sftpd",
	}
	s.ssh.AddHostKey(hostKey)
	return s, nil
}

// HostKey is the server's public host key, e.g. for a known_hosts line.
func (s *Server) HostKey() ssh.PublicKey { return s.hostKey }

// Serve accepts connections on l until ctx is cancelled or the server is
// closed; it then closes the server and returns ErrServerClosed.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if !track(s, s.listeners, l, true) {
		l.Close()
		return ErrServerClosed
	}
	defer track(s, s.listeners, l, false)
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()

	for {
		conn, err := l.Accept()
		if err != nil {
			if s.isStopping() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(50 * time.Millisecond) // transient (e.g. out of file descriptors)
				continue
			}
			return err
		}
		select {
		case s.slots <- struct{}{}:
		default:
			s.logger.Warn("sftp connection refused: too many connections", "remote", conn.RemoteAddr().String())
			conn.Close()
			continue
		}
		if !track(s, s.conns, conn, true) {
			conn.Close()
			<-s.slots
			return ErrServerClosed
		}
		s.connsDone.Add(1)
		go func() {
			defer s.connsDone.Done()
			defer func() { <-s.slots }()
			defer track(s, s.conns, conn, false)
			defer conn.Close()
			s.serveConn(conn)
		}()
	}
}

// Shutdown stops accepting connections and sessions, waits until the running
// SFTP sessions end (an upload in progress completes) or ctx is done, and
// then closes the server.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.sessions.Load() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			s.Close()
			return ctx.Err()
		}
	}
	return s.Close()
}

// Close stops listening, drops every connection (a half-sent upload is
// discarded), then lets running OnUpload hooks finish for up to
// ShutdownPeriod before cancelling their context.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed, s.stopping = true, true
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()

	s.connsDone.Wait()
	hooksDone := make(chan struct{})
	go func() { s.hooks.Wait(); close(hooksDone) }()
	select {
	case <-hooksDone:
	case <-time.After(s.cfg.ShutdownPeriod):
	}
	s.cancel()
	<-hooksDone
	return nil
}

func (s *Server) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// track adds x to or removes it from set, under the server's lock so Close
// sees every listener and connection; adding fails once the server stops.
func track[T comparable](s *Server, set map[T]struct{}, x T, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(set, x)
		return true
	}
	if s.stopping {
		return false
	}
	set[x] = struct{}{}
	return true
}

func (s *Server) serveConn(raw net.Conn) {
	// Login must finish in time; afterwards only inactivity ends the
	// connection.
	loginTimer := time.AfterFunc(s.cfg.LoginTimeout, func() { raw.Close() })
	conn := &idleConn{Conn: raw, timeout: s.cfg.IdleTimeout}
	sconn, chans, reqs, err := ssh.NewServerConn(conn, s.ssh)
	if !loginTimer.Stop() {
		err = errors.Join(err, errors.New("login timed out"))
	}
	if err != nil {
		if sconn != nil {
			sconn.Close()
		}
		s.logger.Info("sftp connection not established", "remote", raw.RemoteAddr().String(), "err", err)
		return
	}
	defer sconn.Close()
	go ssh.DiscardRequests(reqs) // no global requests (port forwarding) are offered

	h, err := s.homeFromPermissions(sconn.Permissions)
	if err != nil {
		s.logger.Error("sftp session without home", "user", sconn.User(), "err", err)
		return
	}
	var sessions sync.WaitGroup
	defer sessions.Wait()
	slots := make(chan struct{}, s.cfg.MaxSessions)
	for newCh := range chans {
		if newCh.ChannelType() != "session" {
			newCh.Reject(ssh.UnknownChannelType, "only SFTP sessions are offered")
			continue
		}
		if s.isStopping() {
			newCh.Reject(ssh.ResourceShortage, "server shutting down")
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			newCh.Reject(ssh.ResourceShortage, "too many sessions on this connection")
			continue
		}
		ch, chReqs, err := newCh.Accept()
		if err != nil {
			<-slots
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			defer func() { <-slots }()
			s.serveSession(ch, chReqs, &handler{srv: s, home: h})
		}()
	}
}

// serveSession waits for the "sftp" subsystem request and serves it; shells,
// commands and terminals are refused.
func (s *Server) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request, h *handler) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "subsystem" || subsystem(req.Payload) != "sftp" {
			req.Reply(false, nil)
			continue
		}
		req.Reply(true, nil)
		go ssh.DiscardRequests(reqs)
		s.sessions.Add(1)
		defer s.sessions.Add(-1)
		rs := sftp.NewRequestServer(ch, h.handlers())
		if err := rs.Serve(); err != nil && !isClosedErr(err) {
			s.logger.Info("sftp session ended", "merchantId", h.home.merchantID, "err", err)
		}
		rs.Close()
		return
	}
}

// subsystem decodes the SSH string payload of a subsystem request.
func subsystem(payload []byte) string {
	var msg struct{ Name string }
	if ssh.Unmarshal(payload, &msg) != nil {
		return ""
	}
	return msg.Name
}

func isClosedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, errConnIdle)
}

// Permission extensions carry the login's home from the auth callbacks to
// the connection: x/crypto hands back the Permissions of the method that
// actually authenticated.
const (
	extMappings = "payreq-home-mappings"
)

func (s *Server) passwordLogin(meta ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
	if len(password) == 0 {
		// To the identity provider an empty password means "key login,
		// send me the keys": it must never count as a password login.
		return nil, errLoginDenied
	}
	resp, err := s.authenticate(meta, string(password))
	if err != nil {
		return nil, err
	}
	return s.permissions(resp)
}

func (s *Server) publicKeyLogin(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	resp, err := s.authenticate(meta, "")
	if err != nil {
		return nil, err
	}
	offered := key.Marshal()
	for _, line := range resp.PublicKeys {
		known, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err == nil && string(known.Marshal()) == string(offered) {
			return s.permissions(resp)
		}
	}
	s.logger.Warn("sftp login refused", "username", meta.User(), "sourceIp", remoteIP(meta.RemoteAddr()),
		"method", "publickey", "reason", "key not registered", "fingerprint", ssh.FingerprintSHA256(key))
	return nil, errLoginDenied
}

var errLoginDenied = errors.New("login denied")

func (s *Server) authenticate(meta ssh.ConnMetadata, password string) (sftpauth.Response, error) {
	ctx, cancel := context.WithTimeout(s.baseCtx, s.cfg.AuthTimeout)
	defer cancel()
	resp, err := s.cfg.Auth.Authenticate(ctx, sftpauth.Event{
		Username: meta.User(),
		Password: password,
		Protocol: "SFTP",
		ServerID: s.cfg.ServerID,
		SourceIP: remoteIP(meta.RemoteAddr()),
	})
	if err != nil {
		s.logger.Error("sftp identity provider failed", "username", meta.User(), "err", err)
		return resp, errLoginDenied
	}
	if !resp.Allowed() {
		return resp, errLoginDenied
	}
	return resp, nil
}

// permissions validates the granted home now, so a login whose home cannot
// be served fails at login rather than on the first command.
func (s *Server) permissions(resp sftpauth.Response) (*ssh.Permissions, error) {
	mappings, err := resp.Mappings()
	if err == nil {
		_, err = newHome(s.cfg.Bucket, mappings)
	}
	if err != nil {
		s.logger.Error("sftp login with unusable home", "err", err)
		return nil, errLoginDenied
	}
	return &ssh.Permissions{Extensions: map[string]string{extMappings: resp.HomeDirectoryDetails}}, nil
}

func (s *Server) homeFromPermissions(p *ssh.Permissions) (*home, error) {
	if p == nil {
		return nil, errors.New("no permissions")
	}
	var mappings []sftpauth.Mapping
	if err := json.Unmarshal([]byte(p.Extensions[extMappings]), &mappings); err != nil {
		return nil, fmt.Errorf("home mappings: %w", err)
	}
	return newHome(s.cfg.Bucket, mappings)
}

// uploaded runs the OnUpload hook without holding up the client's close.
func (s *Server) uploaded(ev UploadEvent) {
	if s.cfg.OnUpload == nil {
		return
	}
	s.hooks.Add(1)
	go func() {
		defer s.hooks.Done()
		s.cfg.OnUpload(s.baseCtx, ev)
	}()
}

func remoteIP(addr net.Addr) string {
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

var errConnIdle = errors.New("connection idle for too long")

// idleConn closes a connection on which nothing has been received for
// timeout: each read pushes the deadline further.
type idleConn struct {
	net.Conn
	timeout time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = errConnIdle
	}
	return n, err
}
