package mail

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The mailbox keeps each message as an owner-only .eml file that reads back
// as sent (UTF-8 subject encoded per RFC 2047), newest last, per address;
// a header with a line break is refused.
func TestDirSendsAndReadsBack(t *testing.T) {
	d := Dir(filepath.Join(t.TempDir(), "mail"))
	ctx := context.Background()
	first := Message{To: "ana@shop.example", Subject: "Invitation to Cedar Street Café", Text: "line one\nhttps://x.example/?token=A\n"}
	second := Message{To: "ana@shop.example", Subject: "again", Text: "token=B"}
	other := Message{To: "bo@shop.example", Subject: "other", Text: "token=C"}
	for _, m := range []Message{first, other, second} {
		if err := d.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := d.Received("ANA@shop.example")
	if err != nil || len(got) != 2 || got[0] != first || got[1] != second {
		t.Fatalf("received %+v (%v)", got, err)
	}
	if m, ok, err := d.Latest("bo@shop.example"); err != nil || !ok || m != other {
		t.Errorf("latest: %+v %v %v", m, ok, err)
	}
	if _, ok, err := d.Latest("nobody@shop.example"); ok || err != nil {
		t.Errorf("a message to nobody: %v %v", ok, err)
	}
	files, _ := filepath.Glob(filepath.Join(string(d), "*.eml"))
	if len(files) != 3 {
		t.Fatalf("%d files", len(files))
	}
	for _, f := range files {
		st, _ := os.Stat(f)
		b, _ := os.ReadFile(f)
		if st.Mode().Perm() != 0o600 || !strings.Contains(string(b), "\r\nContent-Type: text/plain; charset=utf-8\r\n") {
			t.Errorf("%s: mode %v\n%s", f, st.Mode().Perm(), b)
		}
	}
	if err := d.Send(ctx, Message{To: "ana@shop.example\r\nBcc: eve@evil.example", Subject: "x"}); err == nil {
		t.Error("a header with a line break was written")
	}
	if got, _ := Dir(filepath.Join(t.TempDir(), "none")).Received("ana@shop.example"); len(got) != 0 {
		t.Errorf("an absent mailbox holds %v", got)
	}
}
