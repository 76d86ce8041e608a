package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/payreq/payreq/internal/testenv"
)

// sftpClient logs in to the local stack's SFTP server with the Go client.
func sftpClient(t *testing.T, user string, auth ssh.AuthMethod) (*sftp.Client, error) {
	t.Helper()
	conn, err := ssh.Dial("tcp", testenv.Stack(t).Info.SFTPAddr, &ssh.ClientConfig{
		User: user, Auth: []ssh.AuthMethod{auth}, HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	c, err := sftp.NewClient(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	t.Cleanup(func() { c.Close(); conn.Close() })
	return c, nil
}

func TestSFTPSetPasswordAddKeyShow(t *testing.T) {
	s := testenv.Stack(t)
	m := testenv.NewMerchant(t)
	_, port, _ := net.SplitHostPort(s.Info.SFTPAddr)

	shown, stderr, code := payctl(t, "sftp", "show", "--id", m.ID)
	if code != 0 || shown["user"] != m.ID || shown["configured"] != false || shown["passwordSet"] != false || shown["host"] != "127.0.0.1" {
		t.Fatalf("show before set-up: exit %d %s %v", code, stderr, shown)
	}

	// A generated password is shown once and works.
	set, stderr, code := payctl(t, "sftp", "set-password", "--id", m.ID)
	pw, _ := set["password"].(string)
	if code != 0 || len(pw) < 20 || set["notice"] == nil || set["passwordSet"] != true ||
		set["address"] != "sftp://"+m.ID+"@127.0.0.1:"+port {
		t.Fatalf("set-password: exit %d %s %v", code, stderr, set)
	}
	if _, err := sftpClient(t, m.ID, ssh.Password(pw)); err != nil {
		t.Fatalf("login with the generated password: %v", err)
	}
	shown, _, _ = payctl(t, "sftp", "show", "--id", m.ID)
	raw, _ := json.Marshal(shown)
	if shown["password"] != nil || strings.Contains(string(raw), pw) || strings.Contains(string(raw), "argon2") {
		t.Fatalf("show reveals the password or its hash: %s", raw)
	}
	if shown["configured"] != true || shown["passwordUpdatedAt"] == nil {
		t.Errorf("show after set-password: %v", shown)
	}

	// A chosen password replaces it and is not echoed.
	set, _, code = payctl(t, "sftp", "set-password", "--id", m.ID, "--password", "Chosen-Passw0rd!")
	if code != 0 || set["password"] != nil {
		t.Fatalf("set-password --password: exit %d, %v", code, set)
	}
	if _, err := sftpClient(t, m.ID, ssh.Password(pw)); err == nil {
		t.Error("the replaced password still works")
	}
	if _, err := sftpClient(t, m.ID, ssh.Password("Chosen-Passw0rd!")); err != nil {
		t.Errorf("the chosen password: %v", err)
	}
	if _, stderr, code := payctl(t, "sftp", "set-password", "--id", m.ID, "--password", "short"); code != 1 || !strings.Contains(stderr, "at least 12") {
		t.Errorf("short password: exit %d %s", code, stderr)
	}

	// A key: registered, listed by fingerprint, usable; twice is once.
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	sshPub, _ := ssh.NewPublicKey(pub)
	keyFile := filepath.Join(t.TempDir(), "id_ed25519.pub")
	os.WriteFile(keyFile, append(ssh.MarshalAuthorizedKey(sshPub)[:len(ssh.MarshalAuthorizedKey(sshPub))-1], []byte(" ops@acme\n")...), 0o600)
	added, stderr, code := payctl(t, "sftp", "add-key", "--id", m.ID, "--key-file", keyFile)
	keys, _ := added["keys"].([]any)
	if code != 0 || len(keys) != 1 {
		t.Fatalf("add-key: exit %d %s %v", code, stderr, added)
	}
	k := keys[0].(map[string]any)
	if k["fingerprint"] != ssh.FingerprintSHA256(sshPub) || k["type"] != "ssh-ed25519" || k["comment"] != "ops@acme" {
		t.Errorf("key listed as %v", k)
	}
	signer, _ := ssh.NewSignerFromKey(priv)
	if _, err := sftpClient(t, m.ID, ssh.PublicKeys(signer)); err != nil {
		t.Errorf("key login: %v", err)
	}
	again, _, code := payctl(t, "sftp", "add-key", "--id", m.ID, "--key-file", keyFile)
	if code != 0 || len(again["keys"].([]any)) != 1 || again["notice"] == nil {
		t.Errorf("adding the same key again: %v", again)
	}

	bad := filepath.Join(t.TempDir(), "bad.pub")
	os.WriteFile(bad, []byte("not a key\n"), 0o600)
	if _, stderr, code := payctl(t, "sftp", "add-key", "--id", m.ID, "--key-file", bad); code != 1 || !strings.Contains(stderr, "authorized_keys") {
		t.Errorf("bad key file: exit %d %s", code, stderr)
	}
	if _, _, code := payctl(t, "sftp", "show", "--id", "mer_nope"); code != 1 {
		t.Errorf("unknown merchant: exit %d", code)
	}
	for _, args := range [][]string{{"sftp", "show"}, {"sftp", "add-key", "--id", m.ID}, {"sftp", "remove", "--id", m.ID},
		{"batch", "show"}, {"batch", "list", "--id", m.ID}} {
		if _, _, code := payctl(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// batch show summarises a merchant's files after an upload over SFTP.
func TestBatchShow(t *testing.T) {
	testenv.Stack(t)
	m := testenv.NewMerchant(t)
	set, _, code := payctl(t, "sftp", "set-password", "--id", m.ID)
	if code != 0 {
		t.Fatal("set-password failed")
	}
	c, err := sftpClient(t, m.ID, ssh.Password(set["password"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	rows := []string{
		"Jane Doe;4111 1111 1111 1111;12/30;123;jane@example.com;4155550100;1 Main St;Springfield;IL;62701;US;10.50;USD;INV-1",
		"Max Mustermann;4000 0000 0000 0002;03/29;321;max@example.de;4930123456;Hauptstr. 5;Berlin;BE;10115;DE;99.90;EUR;INV-2",
		"Bad Row;4111 1111 1111 1112;13/30;12;not-an-email;123;1 Main St;Springfield;IL;62701;US;10,50;USD;INV-3",
	}
	f, err := c.Create("/incoming/show-me.csv")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, strings.Join(rows, "\n")+"\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		var code int
		out, _, code = payctl(t, "batch", "show", "--id", m.ID, "--file", "show-me.csv")
		if code == 0 && out["batches"].([]any)[0].(map[string]any)["state"] == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch show never reported the file done: %v", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b := out["batches"].([]any)[0].(map[string]any)
	counts := b["counts"].(map[string]any)
	if b["file"] != "show-me.csv" || b["resultFile"] != "/results/show-me.csv.result.csv" || counts["rows"] != 3.0 ||
		counts["approved"] != 1.0 || counts["declined"] != 1.0 || counts["rejected"] != 1.0 || b["completedAt"] == nil {
		t.Errorf("batch show: %v", b)
	}
	if _, err := c.Stat("/results/show-me.csv.result.csv"); err != nil {
		t.Errorf("result file: %v", err)
	}
	all, _, code := payctl(t, "batch", "show", "--id", m.ID)
	if code != 0 || len(all["batches"].([]any)) != 1 {
		t.Errorf("batch show without --file: %v", all)
	}
	if _, stderr, code := payctl(t, "batch", "show", "--id", m.ID, "--file", "other.csv"); code != 1 || !strings.Contains(stderr, "no batch file") {
		t.Errorf("unknown file: exit %d %s", code, stderr)
	}
	raw, _ := json.Marshal(out)
	// The whole number: "4111" alone also turns up inside random ids.
	if strings.Contains(string(raw), "411111111111") || strings.Contains(string(raw), "4111 1111") {
		t.Error("batch show prints a card number")
	}
}
