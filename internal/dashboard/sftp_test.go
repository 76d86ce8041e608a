package dashboard_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
)

// sftpLogin runs the real OpenSSH sftp client against the local SFTP server
// with a password (keyFile empty) or a key, lists /, and returns its output
// and whether it succeeded.
func sftpLogin(t *testing.T, user, password, keyFile string) (string, bool) {
	t.Helper()
	return sftpRun(t, user, password, keyFile, "ls /\n")
}

// sftpRun runs batch commands with the real sftp client.
func sftpRun(t *testing.T, user, password, keyFile, batch string) (string, bool) {
	t.Helper()
	host, port, err := net.SplitHostPort(testenv.Stack(t).Info.SFTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := exec.LookPath("sftp")
	if err != nil {
		t.Fatal("sftp not found (apt-get install openssh-client)")
	}
	args := []string{"-o", "BatchMode=no", "-b", "-", "-P", port, "-F", "/dev/null", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10"}
	name := bin
	if keyFile == "" {
		sshpass, err := exec.LookPath("sshpass")
		if err != nil {
			t.Fatal("sshpass not found (apt-get install sshpass)")
		}
		name = sshpass
		args = append([]string{"-p", password, bin}, append(args, "-o", "PubkeyAuthentication=no",
			"-o", "PreferredAuthentications=password", "-o", "NumberOfPasswordPrompts=1")...)
	} else {
		args = append(args, "-o", "IdentitiesOnly=yes", "-i", keyFile, "-o", "PreferredAuthentications=publickey")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, append(args, user+"@"+host)...)
	cmd.Stdin = strings.NewReader(batch)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// An admin sets the SFTP password in the dashboard; the real sftp client
// logs in with it (and not with a wrong one). SSH keys are added and removed
// the same way.
func TestSFTPPasswordAndKeysSetInTheDashboardWorkWithTheRealClient(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	const sftpPassword = "dashboard-set sftp password"
	prof := u.get("/dashboard/profile")
	if !strings.Contains(prof.body, `id="sftp-user">`+m.ID+`<`) {
		t.Fatalf("profile lacks the SFTP user:\n%s", prof.body)
	}
	if p := u.post("/dashboard/profile/sftp", url.Values{"csrf": {csrfOf(t, prof)}, "action": {"password"}, "password": {"short"}}); p.status != http.StatusBadRequest {
		t.Errorf("short SFTP password: %d", p.status)
	}
	p := u.post("/dashboard/profile/sftp", url.Values{"csrf": {csrfOf(t, prof)}, "action": {"password"}, "password": {sftpPassword}})
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="sftp-password-state">set<`) {
		t.Fatalf("set SFTP password: %d\n%s", p.status, p.body)
	}
	if out, ok := sftpLogin(t, m.ID, sftpPassword, ""); !ok || !strings.Contains(out, "incoming") {
		t.Fatalf("sftp with the new password: ok=%v\n%s", ok, out)
	}
	if out, ok := sftpLogin(t, m.ID, sftpPassword+"x", ""); ok {
		t.Fatalf("sftp with a wrong password logged in:\n%s", out)
	}

	// An SSH key: added, used, removed.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "dashboard test")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " laptop"
	if p := u.post("/dashboard/profile/sftp", url.Values{"csrf": {csrfOf(t, p)}, "action": {"add-key"}, "key": {"ssh-rsa AAAA nonsense"}}); p.status != http.StatusBadRequest {
		t.Errorf("a malformed key: %d", p.status)
	}
	p = u.post("/dashboard/profile/sftp", url.Values{"csrf": {csrfOf(t, p)}, "action": {"add-key"}, "key": {line}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "laptop") {
		t.Fatalf("add key: %d\n%s", p.status, p.body)
	}
	if out, ok := sftpLogin(t, m.ID, "", keyFile); !ok {
		t.Fatalf("sftp with the added key:\n%s", out)
	}
	p = u.post("/dashboard/profile/sftp", url.Values{"csrf": {csrfOf(t, p)}, "action": {"remove-key"}, "key": {line}})
	if p.status != http.StatusOK || strings.Contains(p.body, "laptop") {
		t.Fatalf("remove key: %d", p.status)
	}
	if out, ok := sftpLogin(t, m.ID, "", keyFile); ok {
		t.Fatalf("sftp with the removed key logged in:\n%s", out)
	}
	audit := u.get("/dashboard/audit").body
	for _, want := range []string{"SFTP password set", "SFTP key added: ssh-ed25519 laptop", "SFTP key removed: ssh-ed25519 laptop"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log lacks %q", want)
		}
	}
}

// A batch file uploaded over SFTP shows on the batches page with its
// summary, and its result downloads; another merchant's user cannot
// download it.
func TestBatchSummaryAndResultDownload(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	u.mustSignIn()
	const pw = "batch upload password"
	hash, err := sftpauth.HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.Stack(t).Store.SetSFTPPassword(context.Background(), m.ID, m.ID, hash, time.Now()); err != nil {
		t.Fatal(err)
	}
	name := "orders-" + strings.ToLower(dashuser.NewToken()[:8]) + ".csv"
	content := "Jane Doe;4111 1111 1111 1111;12/30;123;jane@example.com;4155550100;1 Main St;Springfield;IL;62701;US;10.50;USD;INV-1\n" +
		"Joe Roe;4000 0000 0000 0002;12/30;123;joe@example.com;4155550100;1 Main St;Springfield;IL;62701;US;11.00;USD;INV-2\n" +
		"Bad Row;4111 1111 1111 1112;13/30;12;not-an-email;123;1 Main St;Springfield;IL;62701;US;10,50;USD;INV-3\n"
	local := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(local, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, ok := sftpRun(t, m.ID, pw, "", "put "+local+" /incoming/"+name+"\n"); !ok {
		t.Fatalf("upload:\n%s", out)
	}
	result := name + ".result.csv"
	deadline := time.Now().Add(90 * time.Second)
	var p page
	for {
		p = u.get("/dashboard/batches")
		if strings.Contains(p.body, "?file="+url.QueryEscape(result)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch did not finish:\n%s", p.body)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// File, received, state, progress (the file's 3 lines, all done), rows,
	// approved, declined, pending, rejected, duplicate.
	n := func(v int) string {
		return `<td><data class="count" value="` + strconv.Itoa(v) + `">` + strconv.Itoa(v) + `</data></td>`
	}
	row := regexp.MustCompile(`<td>` + regexp.QuoteMeta(name) + `</td><td>[^<]*</td><td class="state">done</td><td class="progress-cell"><progress class="lines" max="3" value="3" [^>]*></progress><span class="lines-text"><data class="count" value="3">3</data> of <data class="count" value="3">3</data> lines</span></td>` +
		n(3) + n(1) + n(1) + n(0) + n(1) + n(0))
	if !row.MatchString(p.body) {
		t.Errorf("batch summary row not as expected:\n%s", p.body)
	}
	dl := u.get("/dashboard/batches/result?file=" + url.QueryEscape(result))
	if dl.status != http.StatusOK || !strings.HasPrefix(dl.body, "1;approved;") || !strings.Contains(dl.body, "2;declined;") || !strings.Contains(dl.body, "3;rejected;") {
		t.Errorf("result download: %d\n%s", dl.status, dl.body)
	}
	// The whole number: "4111" alone also turns up inside random ids.
	if strings.Contains(dl.body, "411111111111") || strings.Contains(dl.body, "4111 1111") {
		t.Error("the result file carries a card number")
	}
	other := newUser(t, testenv.NewMerchant(t), dashuser.RoleAdmin)
	other.mustSignIn()
	if p := other.get("/dashboard/batches/result?file=" + url.QueryEscape(result)); p.status != http.StatusNotFound || strings.Contains(p.body, "approved") {
		t.Errorf("another merchant's user downloads the result: %d", p.status)
	}
	if p := other.get("/dashboard/batches"); strings.Contains(p.body, name) {
		t.Error("another merchant's user sees the batch")
	}
}
