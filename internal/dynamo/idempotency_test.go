package dynamo_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"
)

var idemT0 = time.Date(2031, 7, 8, 9, 0, 0, 0, time.UTC)

func newClaim(merchantID, key, token string, now time.Time) *payment.IdempotencyRecord {
	return &payment.IdempotencyRecord{MerchantID: merchantID, Key: key, Token: token, Fingerprint: "fp-" + key, Nonce: "nonce-" + token,
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour), CreatedAt: now}
}

func TestIdempotencyRecordLifecycle(t *testing.T) {
	s, calls, _, _ := newStore(t)
	ctx := context.Background()
	mid := "mer_idem_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	const key = "order-1, retry \"a\""

	calls.Reset()
	first := newClaim(mid, key, "t1", idemT0)
	if held, err := s.ClaimIdempotencyKey(ctx, first, idemT0); err != nil || held != nil {
		t.Fatalf("claim: %v, %v", held, err)
	}
	if got := calls.Calls(); len(got) != 1 || got[0] != "DynamoDB.PutItem" {
		t.Errorf("claim made %v, want one PutItem", got)
	}
	// Taken: in progress with a running lease.
	if _, err := s.ClaimIdempotencyKey(ctx, newClaim(mid, key, "t2", idemT0), idemT0.Add(59*time.Second)); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("second claim: %v, want Conflict", err)
	}
	rec, err := s.IdempotencyRecord(ctx, mid, key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != payment.IdempotencyInProgress || rec.Token != "t1" || rec.Fingerprint != "fp-"+key || rec.MerchantID != mid || rec.Key != key ||
		!rec.LeaseUntil.Equal(idemT0.Add(time.Minute)) || !rec.ExpiresAt.Equal(idemT0.Add(24*time.Hour)) || !rec.CreatedAt.Equal(idemT0) {
		t.Fatalf("in-progress record %+v", rec)
	}
	if rec.Expired(idemT0) || rec.LeaseExpired(idemT0) || !rec.LeaseExpired(idemT0.Add(time.Minute)) {
		t.Error("Expired/LeaseExpired wrong")
	}

	// Only the claim's holder completes or releases it.
	stranger := *first
	stranger.Token, stranger.Status = "other", 201
	if err := s.CompleteIdempotencyKey(ctx, &stranger, idemT0); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("complete with another token: %v", err)
	}
	if err := s.ReleaseIdempotencyKey(ctx, mid, key, "other"); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("release with another token: %v", err)
	}
	first.Status, first.Body = 201, []byte(`{"id":1}`)
	first.Headers = map[string]string{"Content-Type": "application/json", "Location": "/payment-requests/status/1"}
	calls.Reset()
	if err := s.CompleteIdempotencyKey(ctx, first, idemT0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := calls.Calls(); len(got) != 1 || got[0] != "DynamoDB.UpdateItem" {
		t.Errorf("complete made %v, want one UpdateItem", got)
	}
	rec, err = s.IdempotencyRecord(ctx, mid, key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != payment.IdempotencyCompleted || rec.Status != 201 || string(rec.Body) != `{"id":1}` ||
		rec.Headers["Location"] != "/payment-requests/status/1" || rec.Headers["Content-Type"] != "application/json" ||
		!rec.LeaseUntil.IsZero() || rec.LeaseExpired(idemT0.Add(time.Hour)) {
		t.Fatalf("completed record %+v", rec)
	}
	// Completed: a lapsed lease does not free it, and it cannot be completed
	// or released again.
	if _, err := s.ClaimIdempotencyKey(ctx, newClaim(mid, key, "t3", idemT0), idemT0.Add(23*time.Hour)); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("claim of a completed key: %v", err)
	}
	if err := s.CompleteIdempotencyKey(ctx, first, idemT0); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("second completion: %v", err)
	}
	if err := s.ReleaseIdempotencyKey(ctx, mid, key, "t1"); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("release of a completed key: %v", err)
	}
	// Expired (TTL not run): free to claim again.
	later := idemT0.Add(24 * time.Hour)
	if _, err := s.ClaimIdempotencyKey(ctx, newClaim(mid, key, "t4", later), later); err != nil {
		t.Fatalf("claim of an expired key: %v", err)
	}
	rec, _ = s.IdempotencyRecord(ctx, mid, key)
	if rec.Token != "t4" || rec.State != payment.IdempotencyInProgress || rec.Body != nil || rec.Status != 0 {
		t.Fatalf("the new claim did not replace the old record: %+v", rec)
	}
	// Released: still there with its nonce, its lease over, so a retry takes
	// it over at once and keeps the binding.
	if err := s.ReleaseIdempotencyKey(ctx, mid, key, "t4"); err != nil {
		t.Fatal(err)
	}
	held, err := s.IdempotencyRecord(ctx, mid, key)
	if err != nil || !held.LeaseExpired(later) || held.Nonce != "nonce-t4" {
		t.Fatalf("after release: %+v %v", held, err)
	}
	retry := newClaim(mid, key, "t5", later)
	retry.Nonce = "other"
	if err := s.TakeOverIdempotencyKey(ctx, retry, held, later); err != nil || retry.Nonce != "nonce-t4" {
		t.Fatalf("take over a released key: %v, nonce %q", err, retry.Nonce)
	}
	if _, err := s.ClaimIdempotencyKey(ctx, newClaim(mid+"b", key, "t6", later), later); err != nil {
		t.Fatalf("same key, other merchant: %v", err)
	}
}

func TestIdempotencyLeaseTakeover(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	mid := "mer_lease_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dead := newClaim(mid, "k", "dead", idemT0)
	if _, err := s.ClaimIdempotencyKey(ctx, dead, idemT0); err != nil {
		t.Fatal(err)
	}
	at := idemT0.Add(time.Minute) // the lease ends
	if _, err := s.ClaimIdempotencyKey(ctx, newClaim(mid, "k", "alive", at), at); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("a fresh claim over a lapsed one: %v (want Conflict: a takeover keeps the nonce)", err)
	}
	held, _ := s.IdempotencyRecord(ctx, mid, "k")
	if err := s.TakeOverIdempotencyKey(ctx, newClaim(mid, "k", "alive", at), held, at); err != nil {
		t.Fatalf("takeover after the lease: %v", err)
	}
	if err := s.TakeOverIdempotencyKey(ctx, newClaim(mid, "k", "late", at), held, at); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("a second takeover of the same claim: %v", err)
	}
	dead.Status = 200
	if err := s.CompleteIdempotencyKey(ctx, dead, at); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("the dead holder completed over its successor: %v", err)
	}
	rec, _ := s.IdempotencyRecord(ctx, mid, "k")
	if rec.Token != "alive" {
		t.Fatalf("holder %q", rec.Token)
	}
}

// Empty responses store no body and no headers attributes.
func TestIdempotencyEmptyResponse(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	mid := "mer_empty_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	c := newClaim(mid, "k", "t", idemT0)
	if _, err := s.ClaimIdempotencyKey(ctx, c, idemT0); err != nil {
		t.Fatal(err)
	}
	c.Status = 204
	if err := s.CompleteIdempotencyKey(ctx, c, idemT0); err != nil {
		t.Fatal(err)
	}
	rec, err := s.IdempotencyRecord(ctx, mid, "k")
	if err != nil || rec.Status != 204 || len(rec.Body) != 0 || len(rec.Headers) != 0 {
		t.Fatalf("%+v %v", rec, err)
	}
}

// A claim of a held key returns the holder from the failed put itself
// (ReturnValuesOnConditionCheckFailure: ALL_OLD), as DynamoDB documents.
func TestIdempotencyClaimReturnsHolderWhenDynamoDBSendsIt(t *testing.T) {
	_, _, client, tables := newStore(t)
	s := dynamo.New(client, tables)
	ctx := context.Background()
	mid := "mer_allold_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := s.ClaimIdempotencyKey(ctx, newClaim(mid, "k", "t1", idemT0), idemT0); err != nil {
		t.Fatal(err)
	}
	held, err := s.ClaimIdempotencyKey(ctx, newClaim(mid, "k", "t2", idemT0), idemT0)
	if !errkind.Is(err, errkind.Conflict) || held == nil {
		t.Fatalf("held %v, err %v", held, err)
	}
	if held.Token != "t1" || held.Fingerprint != "fp-k" || held.State != payment.IdempotencyInProgress || held.MerchantID != mid || held.Key != "k" {
		t.Fatalf("held record %+v", held)
	}
}
