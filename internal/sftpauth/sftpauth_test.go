package sftpauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/sftpuser"
)

type memUsers map[string]sftpuser.User

func (m memUsers) SFTPUser(_ context.Context, username string) (sftpuser.User, error) {
	u, ok := m[username]
	if !ok {
		return sftpuser.User{}, errkind.New(errkind.NotFound, "no such user", "")
	}
	return u, nil
}

type failingUsers struct{}

func (failingUsers) SFTPUser(context.Context, string) (sftpuser.User, error) {
	return sftpuser.User{}, errors.New("table unavailable")
}

const (
	testKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb4bDwQbT3nBqZzQ1nqk3bWk2s0J8f1x6P9mH8l2cVg merchant@laptop"
	testRole = "arn:aws:iam::123456789012:role/payreq-sftp"
)

func newAuth(t *testing.T) (*Authenticator, *bytes.Buffer) {
	t.Helper()
	hash, err := HashPassword("s3cret-Pa55")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	return &Authenticator{
		Users: memUsers{
			"acme_batch":  {MerchantID: "m_123", Username: "acme_batch", PasswordHash: hash, PublicKeys: []string{testKey}},
			"keyonly":     {MerchantID: "m_456", Username: "keyonly", PublicKeys: []string{testKey}},
			"pwonly":      {MerchantID: "m_789", Username: "pwonly", PasswordHash: hash},
			"badmerchant": {MerchantID: "../m_1", Username: "badmerchant", PasswordHash: hash},
		},
		Attempts: memAttempts(),
		Bucket:   "payreq-batch",
		RoleARN:  testRole,
		Logger:   slog.New(slog.NewJSONHandler(&logs, nil)),
	}, &logs
}

var errConflict = errkind.New(errkind.Conflict, "conflict", "")

// memCounters is a version-conditional map of attempt counters (the
// DynamoDB store is tested through the local stack: sftpd's and the
// dashboard's suites).
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
		return errConflict
	}
	n := *c
	n.Version++
	s.m[c.Key] = n
	return nil
}

func memAttempts() *lockout.Counting {
	return &lockout.Counting{Store: &memCounters{m: map[string]lockout.Counter{}}}
}

func event(user, pw string) Event {
	return Event{Username: user, Password: pw, Protocol: "SFTP", ServerID: "s-abcd123456", SourceIP: "192.0.2.10"}
}

func TestPasswordLogin(t *testing.T) {
	a, _ := newAuth(t)
	resp, err := a.Authenticate(context.Background(), event("acme_batch", "s3cret-Pa55"))
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Allowed() || resp.Role != testRole || resp.HomeDirectoryType != "LOGICAL" {
		t.Fatalf("response = %+v", resp)
	}
	if resp.PublicKeys != nil {
		t.Errorf("password login must not return public keys: %v", resp.PublicKeys)
	}
	maps, err := resp.Mappings()
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Entry: "/incoming", Target: "/payreq-batch/incoming/m_123"},
		{Entry: "/results", Target: "/payreq-batch/results/m_123"},
	}
	if fmt.Sprint(maps) != fmt.Sprint(want) {
		t.Errorf("mappings = %v, want %v", maps, want)
	}
}

// The wire shape is what Transfer Family parses: HomeDirectoryDetails is a
// JSON string, not an array, and denial is exactly {}.
func TestResponseWireShape(t *testing.T) {
	a, _ := newAuth(t)
	resp, _ := a.Authenticate(context.Background(), event("acme_batch", "s3cret-Pa55"))
	raw, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["HomeDirectoryDetails"].(string); !ok {
		t.Errorf("HomeDirectoryDetails must be a string: %s", raw)
	}
	if _, ok := m["PublicKeys"]; ok {
		t.Errorf("no PublicKeys on a password login: %s", raw)
	}
	denied, _ := json.Marshal(Response{})
	if string(denied) != "{}" {
		t.Errorf("denial = %s, want {}", denied)
	}

	var ev Event
	if err := json.Unmarshal([]byte(`{"username":"u","protocol":"SFTP","serverId":"s-1","sourceIp":"10.0.0.1"}`), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Username != "u" || ev.Password != "" || ev.ServerID != "s-1" || ev.SourceIP != "10.0.0.1" {
		t.Errorf("event = %+v", ev)
	}
}

func TestKeyLogin(t *testing.T) {
	a, _ := newAuth(t)
	for _, user := range []string{"acme_batch", "keyonly"} {
		resp, err := a.Authenticate(context.Background(), event(user, ""))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Allowed() || len(resp.PublicKeys) != 1 || resp.PublicKeys[0] != testKey {
			t.Errorf("%s: response = %+v", user, resp)
		}
	}
}

func TestDenied(t *testing.T) {
	a, logs := newAuth(t)
	cases := []struct {
		name string
		ev   Event
	}{
		{"wrong password", event("acme_batch", "wrong")},
		{"unknown user password", event("nobody", "s3cret-Pa55")},
		{"unknown user key", event("nobody", "")},
		{"key login without keys", event("pwonly", "")},
		{"password login of key-only user", event("keyonly", "anything")},
		{"invalid username", event("../etc", "s3cret-Pa55")},
		{"ftp", Event{Username: "acme_batch", Password: "s3cret-Pa55", Protocol: "FTP", SourceIP: "192.0.2.10"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := a.Authenticate(context.Background(), c.ev)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Allowed() {
				t.Fatalf("allowed: %+v", resp)
			}
			if raw, _ := json.Marshal(resp); string(raw) != "{}" {
				t.Errorf("denial = %s, want {}", raw)
			}
		})
	}
	out := logs.String()
	if !strings.Contains(out, `"username":"nobody"`) || !strings.Contains(out, `"sourceIp":"192.0.2.10"`) {
		t.Errorf("failed attempts must be logged with username and source IP:\n%s", out)
	}
	for _, secret := range []string{"s3cret-Pa55", `"wrong"`, "anything"} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains a password %q:\n%s", secret, out)
		}
	}
}

func TestErrors(t *testing.T) {
	a, _ := newAuth(t)
	a.Users = failingUsers{}
	if _, err := a.Authenticate(context.Background(), event("acme_batch", "x")); err == nil {
		t.Error("store failure must be an error")
	}
	a, _ = newAuth(t)
	if resp, err := a.Authenticate(context.Background(), event("badmerchant", "s3cret-Pa55")); err == nil || resp.Allowed() {
		t.Error("a merchant id with path segments must not produce a home")
	}
	a.RoleARN = ""
	if _, err := a.Authenticate(context.Background(), event("acme_batch", "s3cret-Pa55")); err == nil {
		t.Error("missing RoleARN must be an error")
	}
}

// An unknown user costs a hash like a wrong password does, so response time
// does not tell which usernames exist.
func TestUnknownUserTiming(t *testing.T) {
	a, _ := newAuth(t)
	ctx := context.Background()
	measure := func(ev Event) time.Duration {
		best := time.Duration(1 << 62)
		for range 5 {
			start := time.Now()
			a.Authenticate(ctx, ev)
			best = min(best, time.Since(start))
		}
		return best
	}
	known := measure(event("acme_batch", "wrong"))
	unknown := measure(event("nobody", "wrong"))
	keyOnly := measure(event("keyonly", "wrong"))
	for name, d := range map[string]time.Duration{"unknown user": unknown, "key-only user": keyOnly} {
		// Skipping the hash would be thousands of times faster; the loose
		// bounds only absorb scheduling noise on a busy machine.
		if d < known/4 || d > known*4 {
			t.Errorf("%s took %v, wrong password %v: timing reveals the user", name, d, known)
		}
	}
}

func TestEventNeverShowsPassword(t *testing.T) {
	ev := event("acme_batch", "s3cret-Pa55")
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("event", "ev", ev)
	for _, out := range []string{fmt.Sprint(ev), fmt.Sprintf("%v %+v", ev, ev), logs.String()} {
		if strings.Contains(out, "s3cret") {
			t.Errorf("password leaked: %s", out)
		}
	}
}

func TestHashPassword(t *testing.T) {
	start := time.Now()
	h, err := HashPassword("correct horse")
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hash %s took %v", h, elapsed)
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash = %q", h)
	}
	if !CheckPassword(h, "correct horse") {
		t.Error("right password rejected")
	}
	if CheckPassword(h, "correct horse ") || CheckPassword(h, "") {
		t.Error("wrong password accepted")
	}
	h2, _ := HashPassword("correct horse")
	if h == h2 {
		t.Error("hashes must be salted")
	}
	if _, err := HashPassword(""); err == nil {
		t.Error("empty password must be refused")
	}
	for _, bad := range []string{"", "plain", "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ", "$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=99999999,t=2,p=1$c2FsdHNhbHQ$" + strings.Repeat("A", 43), "$2a$10$abcdefghijklmnopqrstuv"} {
		if CheckPassword(bad, "x") {
			t.Errorf("malformed hash %q accepted", bad)
		}
	}
}

func TestDummyHashHasCurrentParameters(t *testing.T) {
	p, ok := parseHash(dummyHash)
	if !ok {
		t.Fatal("dummy hash does not parse")
	}
	if p.memory != argonMemory || p.time != argonTime || p.threads != argonThreads || len(p.key) != argonKeyLen {
		t.Errorf("dummy hash parameters %+v differ from new hashes: unknown users would be timed differently", p)
	}
}

// Password attempts are counted per user name and locked as the
// dashboard's are: five wrong passwords lock the user; the right one is then
// refused with the very denial of a wrong password, without being checked,
// and the lock is logged (never the password); a key login is unaffected;
// after the lock the right password works and clears the count.
func TestPasswordAttemptsLockTheUserOut(t *testing.T) {
	a, logs := newAuth(t)
	now := time.Now()
	a.Attempts.Now = func() time.Time { return now }
	ctx := context.Background()
	for i := range lockout.MaxFailures {
		if resp, err := a.Authenticate(ctx, event("acme_batch", fmt.Sprintf("wrong %d", i))); err != nil || resp.Allowed() {
			t.Fatalf("wrong password %d: %+v %v", i, resp, err)
		}
	}
	resp, err := a.Authenticate(ctx, event("acme_batch", "s3cret-Pa55"))
	if err != nil || resp.Allowed() {
		t.Fatalf("right password while locked: %+v %v", resp, err)
	}
	if raw, _ := json.Marshal(resp); string(raw) != "{}" {
		t.Errorf("locked denial = %s, want {} (the wrong password's)", raw)
	}
	out := logs.String()
	for _, want := range []string{`"msg":"sftp user locked"`, `"reason":"locked"`, `"lockedUntil"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret-Pa55") || strings.Contains(out, "wrong 1") {
		t.Errorf("log contains a password:\n%s", out)
	}
	if resp, err := a.Authenticate(ctx, event("acme_batch", "")); err != nil || !resp.Allowed() || len(resp.PublicKeys) != 1 {
		t.Errorf("key login while the password is locked: %+v %v", resp, err)
	}
	now = now.Add(lockout.LockFor(lockout.MaxFailures) + time.Second)
	if resp, err := a.Authenticate(ctx, event("acme_batch", "s3cret-Pa55")); err != nil || !resp.Allowed() {
		t.Fatalf("right password after the lock: %+v %v", resp, err)
	}
	if c, _ := a.Attempts.Store.LoginAttempts(ctx, sftpuser.AttemptKey("acme_batch")); c.Failures != 0 || !c.LockedUntil.IsZero() {
		t.Errorf("after the right password: %+v", c)
	}
	// Unknown names are counted too (the same work as a user's).
	for range lockout.MaxFailures {
		_, _ = a.Authenticate(ctx, event("nobody", "guess"))
	}
	if c, _ := a.Attempts.Store.LoginAttempts(ctx, sftpuser.AttemptKey("nobody")); c.Failures != lockout.MaxFailures || !c.Locked(now) {
		t.Errorf("unknown name: %+v", c)
	}
}
