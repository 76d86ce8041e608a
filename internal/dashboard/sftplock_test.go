package dashboard_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/sftpuser"
	"github.com/payreq/payreq/internal/testenv"
)

// sftpAuthOnStack is the identity provider as SftpAuthFunction wires it,
// on the local stack's DynamoDB, logging into logs.
func sftpAuthOnStack(t *testing.T, logs *syncLog) *sftpauth.Authenticator {
	t.Helper()
	st := testenv.Stack(t).Store
	return &sftpauth.Authenticator{Users: st, Bucket: "payreq-batch", RoleARN: "arn:aws:iam::000000000000:role/payreq-sftp-local",
		Attempts: &lockout.Counting{Store: st},
		Logger:   slog.New(slog.NewJSONHandler(logs, nil))}
}

type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func sftpAttempts(t *testing.T, username string) lockout.Counter {
	t.Helper()
	c, err := testenv.Stack(t).Store.LoginAttempts(context.Background(), sftpuser.AttemptKey(username))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withSFTPPassword gives m's SFTP user a password.
func withSFTPPassword(t *testing.T, merchantID, pw string) {
	t.Helper()
	hash, err := sftpauth.HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.Stack(t).Store.SetSFTPPassword(context.Background(), merchantID, dynamo.SFTPUsername(merchantID), hash, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// loginsAtOnce sends the password logins at the same moment and returns
// how many were let in.
func loginsAtOnce(t *testing.T, a *sftpauth.Authenticator, user string, pws []string) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	in := 0
	start := make(chan struct{})
	for _, pw := range pws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := a.Authenticate(context.Background(), sftpauth.Event{Username: user, Password: pw, Protocol: "SFTP", ServerID: "s-local", SourceIP: "127.0.0.1"})
			if err != nil {
				t.Errorf("login: %v", err)
			}
			if resp.Allowed() {
				mu.Lock()
				in++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	return in
}

// 30 wrong SFTP passwords at once, on the stack's DynamoDB: exactly the
// schedule's 5 are counted (admitted to the check) and the lock is set;
// then 30 right passwords at once while locked: all refused, nothing
// counted. The same for a name that is nobody's.
func TestSFTPPasswordAttemptsAtOnceKeepTheLockout(t *testing.T) {
	m := testenv.NewMerchant(t)
	const pw = "the right sftp password"
	withSFTPPassword(t, m.ID, pw)
	logs := &syncLog{}
	a := sftpAuthOnStack(t, logs)
	for _, user := range []string{m.ID, "nobody_" + m.ID} {
		wrong := make([]string, burst)
		for i := range wrong {
			wrong[i] = "wrong " + strconv.Itoa(i)
		}
		if in := loginsAtOnce(t, a, user, wrong); in != 0 {
			t.Fatalf("%s: %d wrong passwords let in", user, in)
		}
		c := sftpAttempts(t, user)
		if c.Seq != lockout.MaxFailures || c.Failures != lockout.MaxFailures || !c.Locked(time.Now()) {
			t.Errorf("%s after 30 wrong at once: %d admitted, %d failures, locked until %v; want %d, %d and a lock",
				user, c.Seq, c.Failures, c.LockedUntil, lockout.MaxFailures, lockout.MaxFailures)
		}
		right := make([]string, burst)
		for i := range right {
			right[i] = pw
		}
		if in := loginsAtOnce(t, a, user, right); in != 0 {
			t.Errorf("%s: %d right passwords let in while locked", user, in)
		}
		if after := sftpAttempts(t, user); after.Seq != c.Seq {
			t.Errorf("%s: %d attempts counted while locked", user, after.Seq-c.Seq)
		}
	}
	if out := logs.String(); !strings.Contains(out, `"msg":"sftp user locked"`) || !strings.Contains(out, `"reason":"locked"`) || strings.Contains(out, pw) || strings.Contains(out, "wrong 1") {
		t.Errorf("logs: want the lock logged and no password:\n%.2000s", out)
	}
}

// Through the local SFTP server with the real OpenSSH client: five wrong
// passwords lock the SFTP user; the right one is then refused with the
// wrong one's answer; a key still logs in; the dashboard's SFTP panel
// (Chromium) shows the lock and when it ends; a new password set there ends
// the lock and logs in.
func TestSFTPLockoutWithTheRealClientAndTheDashboardPanel(t *testing.T) {
	m := testenv.NewMerchant(t)
	const pw = "the right sftp password"
	withSFTPPassword(t, m.ID, pw)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, _ := ssh.NewPublicKey(pub)
	block, _ := ssh.MarshalPrivateKey(priv, "lock test")
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	st := testenv.Stack(t).Store
	if err := st.AddSFTPKey(context.Background(), m.ID, dynamo.SFTPUsername(m.ID), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))), time.Now()); err != nil {
		t.Fatal(err)
	}

	var wrongOut string
	for i := range lockout.MaxFailures {
		out, ok := sftpLogin(t, m.ID, "wrong password "+strconv.Itoa(i), "")
		if ok {
			t.Fatalf("wrong password %d logged in:\n%s", i, out)
		}
		wrongOut = out
	}
	out, ok := sftpLogin(t, m.ID, pw, "")
	if ok {
		t.Fatalf("the right password logged in while locked:\n%s", out)
	}
	if out != wrongOut {
		t.Errorf("a locked user's answer differs from a wrong password's:\n%q\n%q", out, wrongOut)
	}
	if out, ok := sftpLogin(t, m.ID, "", keyFile); !ok {
		t.Errorf("key login while the password is locked:\n%s", out)
	}
	c := sftpAttempts(t, m.ID)
	if !c.Locked(time.Now()) {
		t.Fatalf("not locked: %+v", c)
	}

	u := newUser(t, m, dashuser.RoleAdmin)
	tab := bt.New(t)
	signInTab(t, tab, u)
	bt.Navigate(t, tab, u.base+u.at("/dashboard/profile"))
	lock := bt.Eval[string](t, tab, text("#sftp-lock"))
	until := c.LockedUntil.UTC().Format("2006-01-02 15:04:05 UTC")
	if !strings.Contains(lock, "Locked until "+until) || !strings.Contains(lock, "5 wrong passwords") {
		t.Errorf("SFTP panel: %q, want the lock until %s", lock, until)
	}
	navigateBy(t, tab, `document.querySelector("#sftp-password").value = "a brand new sftp password"; document.querySelector("#set-sftp-password").click()`)
	if got := bt.Eval[string](t, tab, `(document.querySelector("#sftp-lock") || {textContent: ""}).textContent`); got != "" {
		t.Errorf("SFTP panel after a new password: %q", got)
	}
	if out, ok := sftpLogin(t, m.ID, "a brand new sftp password", ""); !ok {
		t.Errorf("the new password after the lock was lifted:\n%s", out)
	}
}
