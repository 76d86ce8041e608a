package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

// legacy is a problem as the edge built it by hand before kinds existed.
func legacy(status int, slug, title, detail string, code codes.Code) *Problem {
	return &Problem{Type: TypeBase + slug, Title: title, Status: status, Detail: detail, Code: code}
}

// TestKindsMapToTheSameBodies: an error kind reaches the client as exactly
// the problem the edge built by hand before kinds existed (status, type,
// title, detail, code, errors), so moving the core to kinds changes no body.
func TestKindsMapToTheSameBodies(t *testing.T) {
	fields := []errkind.FieldError{{Field: "amount", Code: codes.InvalidAmount, Detail: "amount must be greater than zero"},
		{Field: "unit", Code: codes.InvalidCurrency, Detail: "unit is not accepted"}}
	cases := []struct {
		kind *errkind.Error
		want *Problem
	}{
		{errkind.BadInput("bad id", codes.InvalidPaymentMethod), legacy(400, "bad-request", "Bad Request", "bad id", codes.InvalidPaymentMethod)},
		{errkind.Validation(fields), legacyValidation(fields)},
		{errkind.Validation(fields[:1]), legacyValidation(fields[:1])},
		{errkind.NotFoundErr("Payment request 7 does not exist."), legacy(404, "not-found", "Not Found", "Payment request 7 does not exist.", codes.EntityNotFound)},
		{errkind.ConflictErr("Payment request 7 is cancelled.", codes.TransactionCancelled), legacy(409, "conflict", "Conflict", "Payment request 7 is cancelled.", codes.TransactionCancelled)},
		{errkind.UnavailableErr("The payment provider did not answer."), legacy(503, "unavailable", "Service Unavailable", "The payment provider did not answer.", codes.SystemError)},
		{errkind.UnauthorizedErr("The X-API-Key header is missing."), legacy(401, "unauthorized", "Unauthorized", "The X-API-Key header is missing.", codes.InvalidCredentials)},
		{errkind.New(errkind.TooLarge, "The request body exceeds 65536 bytes.", ""), legacy(413, "payload-too-large", "Payload Too Large", "The request body exceeds 65536 bytes.", "")},
		{errkind.New(errkind.UnsupportedMedia, "Send the body as application/json.", ""), legacy(415, "unsupported-media-type", "Unsupported Media Type", "Send the body as application/json.", "")},
		{errkind.RateLimitedErr("Too many requests.", 0), legacy(429, "rate-limited", "Too Many Requests", "Too many requests.", "")},
		// The reasons: problem types of their own.
		{errkind.Because(errkind.IdempotencyKeyReused, "reused", ""), legacy(422, "idempotency-key-reused", "Unprocessable Content", "reused", "")},
		{errkind.Because(errkind.IdempotencyKeyInUse, "in use", ""), legacy(409, "idempotency-key-in-use", "Conflict", "in use", "")},
		{errkind.Because(errkind.CheckoutTokenInvalid, "expired", codes.InvalidToken), legacy(401, "invalid-checkout-token", "Unauthorized", "expired", codes.InvalidToken)},
		{errkind.Because(errkind.TooManyAttempts, "too many", ""), legacy(429, "too-many-attempts", "Too Many Requests", "too many", "")},
	}
	for _, c := range cases {
		got, want := body(t, From(c.kind)), body(t, c.want)
		if got != want {
			t.Errorf("%v:\n got %s\nwant %s", c.kind, got, want)
		}
	}
	bad := errkind.Because(errkind.IdempotencyKeyInvalid, "Send one key.", "")
	bad.Fields = []errkind.FieldError{{Field: "Idempotency-Key", Detail: "must be sent once"}}
	want := legacy(400, "invalid-idempotency-key", "Bad Request", "Send one key.", "")
	want.Errors = bad.Fields
	if got, want := body(t, From(bad)), body(t, want); got != want {
		t.Errorf("invalid Idempotency-Key:\n got %s\nwant %s", got, want)
	}
	internal := legacy(500, "internal", "Internal Server Error",
		"An unexpected error occurred; it has been logged. Retry later or contact support with the request id.", codes.SystemError)
	for _, err := range []error{&errkind.Error{Kind: errkind.Unknown, Detail: "x"}, errors.New("secret detail"), nil} {
		if got, want := body(t, From(err)), body(t, internal); got != want {
			t.Errorf("%v: got %s, want the internal problem", err, got)
		}
	}
	busy := errkind.ConflictErr("Another payment attempt is in progress.", "")
	busy.RetryAfter = 2400 * time.Millisecond
	if p := From(busy); p.Status != http.StatusConflict || p.Headers.Get("Retry-After") != "2" {
		t.Errorf("conflict with RetryAfter: status %d, Retry-After %q", p.Status, p.Headers.Get("Retry-After"))
	}
	wrapped := fmt.Errorf("charge row: %w", errkind.NotFoundErr("gone"))
	if p := From(wrapped); p.Status != http.StatusNotFound {
		t.Errorf("From(wrapped not found) = %v", p)
	}
}

// TestEveryKindAndReasonHasAnEntry: the table covers every kind and reason
// errkind declares.
func TestEveryKindAndReasonHasAnEntry(t *testing.T) {
	for _, k := range errkind.Kinds() {
		if _, ok := kinds[k]; !ok {
			t.Errorf("kind %s has no entry in the table", k)
		}
	}
	for _, r := range errkind.Reasons() {
		if _, ok := reasons[r]; !ok {
			t.Errorf("reason %d has no entry in the table", r)
		}
	}
}

// legacyValidation is problem.Validation as it was written before kinds.
func legacyValidation(errs []errkind.FieldError) *Problem {
	p := legacy(http.StatusBadRequest, "validation", "Invalid request", "One or more fields are invalid.", "")
	p.Errors = errs
	if len(errs) > 0 {
		p.Code = errs[0].Code
		if len(errs) == 1 {
			p.Detail = errs[0].Detail
		}
	}
	return p
}

func body(t *testing.T, p *Problem) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
