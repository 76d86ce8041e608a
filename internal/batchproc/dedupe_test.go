package batchproc_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/testenv"
)

// The two dedupe rules across files. A Reference ID charged once is never
// charged again for the merchant, even with other data (a corrected line);
// a row without one is a duplicate of a row with the same card, amount and
// unit (however written) within 24 hours, and is charged again after that.
// The duplicate line names the original payment. The fingerprint is keyed:
// its record sits under the HMAC of the row with the service key, and
// holds no card number.
func TestDedupeByReferenceAndFingerprint(t *testing.T) {
	f := newFixture(t)
	clk := newTestClock()
	p, pay, _ := f.processor(t, nil, func(d *batchproc.Deps) { d.Now = clk.Now })
	m := testenv.NewMerchant(t)
	ctx := context.Background()
	run := func(name string, lines ...string) []resultLine {
		t.Helper()
		if err := p.HandleS3(ctx, f.upload(t, m.ID, name, []byte(strings.Join(lines, "\n")+"\n"))); err != nil {
			t.Fatal(err)
		}
		return parseResult(t, f.result(t, m.ID, name))
	}
	charges := func() int {
		n, twice := pay.total()
		if len(twice) > 0 {
			t.Fatalf("charged twice: %v", twice)
		}
		return n
	}

	first := run("first.csv",
		line("Jane Doe", "4111 1111 1111 1111", "12/30", "123", "10.50", "USD", "INV-1"),
		line("No Ref", "5555 5555 5555 4444", "12/30", "123", "3", "USD", ""),
		line("No Ref", "5555-5555-5555-4444", "12/30", "321", "3.00", "usd", ""), // the same payment, written otherwise
	)
	if first[0].status != "approved" || first[1].status != "approved" || charges() != 2 {
		t.Fatalf("first file: %+v", first)
	}
	if d := first[2]; d.status != "duplicate" || d.prID != first[1].prID || d.txID != first[1].txID ||
		!strings.Contains(d.message, "same card, amount and unit already charged within 24 hours by line 2 of first.csv (approved)") {
		t.Errorf("same payment in one file: %+v", d)
	}

	clk.advance(time.Hour)
	corrected := run("corrected.csv",
		line("Jane Doe", "4111 1111 1111 1111", "12/30", "123", "12.00", "USD", "INV-1"), // corrected amount, same reference
		line("Jane Doe", "4111 1111 1111 1111", "12/30", "123", "12.00", "USD", "INV-2"),
		line("No Ref", "5555 5555 5555 4444", "12/30", "123", "3", "USD", ""),
		line("No Ref", "5555 5555 5555 4444", "12/30", "123", "4", "USD", ""), // another amount
	)
	want := []string{"duplicate", "approved", "duplicate", "approved"}
	for i, l := range corrected {
		if l.status != want[i] {
			t.Errorf("corrected line %d: %+v, want %s", i+1, l, want[i])
		}
	}
	if d := corrected[0]; d.prID != first[0].prID || d.txID != first[0].txID ||
		!strings.Contains(d.message, "Reference ID already used by line 1 of first.csv (approved)") {
		t.Errorf("reference duplicate: %+v", d)
	}
	if charges() != 4 {
		t.Fatalf("%d charges after the corrected file, want 4", charges())
	}

	clk.advance(24 * time.Hour)
	later := run("later.csv",
		line("No Ref", "5555 5555 5555 4444", "12/30", "123", "3", "USD", ""),
		line("Jane Doe", "4111 1111 1111 1111", "12/30", "123", "10.50", "USD", "INV-1"),
	)
	if later[0].status != "approved" || later[0].prID == first[1].prID || later[1].status != "duplicate" || charges() != 5 {
		t.Errorf("a day later: %+v (charges %d)", later, charges())
	}

	// The fingerprint record: keyed, no card number in it.
	mac := hmac.New(sha256.New, testFingerprintKey)
	mac.Write([]byte("v1\x00" + "5555555555554444" + "\x00" + "4" + "\x00" + "USD"))
	key := batch.RowKeyOfFingerprint(hex.EncodeToString(mac.Sum(nil)))
	rec, err := f.testStore.BatchRowRecord(ctx, m.ID, key, clk.Now().Add(-time.Hour)) // written 24 h ago
	if err != nil || rec.File != "corrected.csv" || rec.Row != 4 {
		t.Fatalf("fingerprint record: %+v %v", rec, err)
	}
	plain := sha256.Sum256([]byte("5555555555554444"))
	if _, err := f.testStore.BatchRowRecord(ctx, m.ID, batch.RowKeyOfFingerprint(hex.EncodeToString(plain[:])), clk.Now()); !errkind.Is(err, errkind.NotFound) {
		t.Errorf("a plain hash of the card finds a record: %v", err)
	}
	item, err := dynamodb.NewFromConfig(f.cfg).GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(f.stack.Resources.Tables["OperationsTable"]), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "batchrow#" + m.ID + "#" + key}, "sk": &types.AttributeValueMemberS{Value: "row"}},
	})
	if err != nil || item.Item == nil {
		t.Fatalf("raw record: %v", err)
	}
	for k, v := range item.Item {
		if s, ok := v.(*types.AttributeValueMemberS); ok && (strings.Contains(s.Value, "5555555555554444") || strings.Contains(s.Value, "4444 ")) {
			t.Errorf("attribute %s carries card data: %q", k, s.Value)
		}
	}
	if exp := item.Item["expiresAt"].(*types.AttributeValueMemberN).Value; exp != itoa(int(rec.CreatedAt.Add(24*time.Hour).Unix())) {
		t.Errorf("the fingerprint record created at %s expires at %s, not 24 h later", rec.CreatedAt, exp)
	}
}
