package batchproc_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/batch"

	"github.com/payreq/payreq/internal/testenv"
)

// A merchant uploads a mixed batch file with the real OpenSSH sftp client to
// the local stack's SFTP server and gets the result back in the same
// session: by password, then the same bytes again by key under another name
// (recognised by content: the result repeats the first run's payments).
func TestOpenSSHUploadGetsResultInSameSession(t *testing.T) {
	f := newFixture(t)
	m := newSFTPMerchant(t, f)
	content, want := mixedFile(randomHex(4))
	dir := t.TempDir()
	src := filepath.Join(dir, "payments-2026-01-15.csv")
	if err := os.WriteFile(src, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}

	// The stack invokes the batch function when the upload closes, as S3
	// does, with the function's timeout; a 12-line file ends within that one
	// invocation. So the result is awaited for that long, not for a guess
	// at how fast a loaded machine is.
	setup, _, err := f.stack.Resources.SFTPSetup()
	if err != nil || setup.Timeout <= 0 {
		t.Fatalf("the batch function's timeout: %+v %v", setup, err)
	}
	s := openSFTP(t, f.stack.Info.SFTPAddr, m.user, m.password, "")
	s.run("put " + src + " /incoming/")
	took := s.waitFor("/results", "payments-2026-01-15.csv.result.csv", setup.Timeout)
	t.Logf("result visible %.2fs after the upload", took.Seconds())
	got := filepath.Join(dir, "result.csv")
	s.run("get /results/payments-2026-01-15.csv.result.csv " + got)
	if left := s.run("ls -1 /incoming"); len(left) != 0 {
		t.Errorf("the upload is still in /incoming: %q", left)
	}
	s.close()
	data, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	first := parseResult(t, string(data))
	checkMixed(t, first, want)
	// Whole card numbers, as typed or normalised: a four-digit prefix such as
	// "4111" also turns up by chance inside the random 16-digit ids.
	for _, pan := range []string{"4111111111111111", "4111 1111 1111 1111", "378282246310005", "3782 822463 10005", "5555555555554444"} {
		if strings.Contains(string(data), pan) {
			t.Errorf("the result file contains the card number %s", pan)
		}
	}
	// The formula-looking reference is not in the result, but a holder name
	// starting with "=" must never be echoed unneutralised either.
	if strings.Contains(string(data), ";=") || strings.Contains(string(data), ";@") {
		t.Errorf("unneutralised cell in %q", data)
	}

	// Every charged line is a payment request of this merchant, with the
	// line's outcome, on the status endpoint.
	api := f.stack.Info.APIBase
	for i, l := range first {
		if l.prID == "" {
			continue
		}
		r := testenv.Do(t, "GET", api+"/payment-requests/status/"+l.prID, m.APIKey, nil)
		if r.Status != 200 {
			t.Fatalf("line %d: status of %s: %d %s", i+1, l.prID, r.Status, r.Body)
		}
		var pr struct {
			PaymentRequestStatusID int             `json:"paymentRequestStatusId"`
			TransactionID          json.RawMessage `json:"transactionId"`
			TransactionStatusID    int             `json:"transactionStatusId"`
			LastLog                struct {
				Code string `json:"code"`
			} `json:"lastLog"`
		}
		if err := json.Unmarshal(r.Body, &pr); err != nil {
			t.Fatal(err)
		}
		wantReq := 2
		if l.status == "approved" {
			wantReq = 1
		}
		if pr.PaymentRequestStatusID != wantReq || itoa(pr.TransactionStatusID) != l.tsID || pr.LastLog.Code != l.code ||
			strings.Trim(string(pr.TransactionID), `"`) != l.txID {
			t.Errorf("line %d: payment request %s is %s, result line %+v", i+1, l.prID, r.Body, l)
		}
	}
	if r := testenv.Do(t, "GET", api+"/payment-requests/status/"+first[0].prID, testenv.NewMerchant(t).APIKey, nil); r.Status != 404 {
		t.Errorf("another merchant sees the batch's payment request: %d", r.Status)
	}

	// Same bytes, key login, another name: nothing is charged again.
	again := filepath.Join(dir, "again.csv")
	if err := os.WriteFile(again, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	k := openSFTP(t, f.stack.Info.SFTPAddr, m.user, "", m.keyPath)
	k.run("put " + again + " /incoming/again.csv")
	k.waitFor("/results", "again.csv.result.csv", setup.Timeout)
	got2 := filepath.Join(dir, "result2.csv")
	k.run("get /results/again.csv.result.csv " + got2)
	if left := k.run("ls -1 /incoming"); len(left) != 0 {
		t.Errorf("the upload is still in /incoming: %q", left)
	}
	k.run("rm /results/again.csv.result.csv")
	if left := k.run("ls -1 /results"); len(left) != 1 {
		t.Errorf("/results after rm: %q", left)
	}
	k.close()
	data2, err := os.ReadFile(got2)
	if err != nil {
		t.Fatal(err)
	}
	// The same bytes again charge nothing: each payment is a duplicate.
	checkDuplicates(t, parseResult(t, string(data2)), parseResult(t, string(data)), "payments-2026-01-15.csv")

	// The summaries.
	for name, want := range map[string]batch.Counts{
		"payments-2026-01-15.csv": {Rows: 12, Approved: 4, Declined: 4, Rejected: 4},
		"again.csv":               {Rows: 12, Duplicate: 8, Rejected: 4},
	} {
		jobs := f.jobs(t, m.ID, name)
		if len(jobs) != 1 || jobs[0].State != "done" || jobs[0].Counts != want {
			t.Errorf("%s summary: %+v", name, jobs[0])
		}
	}
}

// The seeded merchant of stack.json can log in with its password.
func TestSeededMerchantSFTPLogin(t *testing.T) {
	f := newFixture(t)
	info := f.stack.Info
	if info.SFTPAddr == "" || info.Merchant.SFTPUser == "" || info.Merchant.SFTPPassword == "" {
		t.Fatalf("stack.json lacks SFTP details: %+v", info)
	}
	s := openSFTP(t, info.SFTPAddr, info.Merchant.SFTPUser, info.Merchant.SFTPPassword, "")
	out := s.run("ls -1 /")
	if strings.Join(out, ",") != "incoming,results" && strings.Join(out, ",") != "/incoming,/results" {
		t.Errorf("home listing %q", out)
	}
}

func itoa(i int) string {
	if i == 0 {
		return ""
	}
	return strconv.Itoa(i)
}
