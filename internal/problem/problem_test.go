package problem

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

// TestKindsMapToTheSameBodies: an error kind reaches the client as exactly
// the problem the edge built by hand before kinds existed (status, type,
// title, detail, code, errors), so moving the core to kinds changes no body.
func TestKindsMapToTheSameBodies(t *testing.T) {
	fields := []FieldError{{Field: "amount", Code: codes.InvalidAmount, Detail: "amount must be greater than zero"},
		{Field: "unit", Code: codes.InvalidCurrency, Detail: "unit is not accepted"}}
	cases := []struct {
		kind *errkind.Error
		want *Problem
	}{
		{errkind.BadInput("bad id", codes.InvalidPaymentMethod), BadRequest("bad id", codes.InvalidPaymentMethod)},
		{errkind.Validation(fields), legacyValidation(fields)},
		{errkind.Validation(fields[:1]), legacyValidation(fields[:1])},
		{errkind.NotFoundErr("Payment request 7 does not exist."), NotFound("Payment request 7 does not exist.")},
		{errkind.ConflictErr("Payment request 7 is cancelled.", codes.TransactionCancelled), Conflict("Payment request 7 is cancelled.", codes.TransactionCancelled)},
		{errkind.UnavailableErr("The payment provider did not answer."), Unavailable("The payment provider did not answer.")},
		{errkind.New(errkind.Unauthorized, "The X-API-Key header is missing.", codes.InvalidCredentials), Unauthorized("The X-API-Key header is missing.")},
	}
	for _, c := range cases {
		got, want := body(t, From(c.kind)), body(t, c.want)
		if got != want {
			t.Errorf("%v:\n got %s\nwant %s", c.kind, got, want)
		}
	}
	if p := From(&errkind.Error{Kind: errkind.Unknown, Detail: "x"}); p.Status != http.StatusInternalServerError {
		t.Errorf("unknown kind: status %d, want 500", p.Status)
	}
	busy := errkind.ConflictErr("Another payment attempt is in progress.", "")
	busy.RetryAfter = 2400 * time.Millisecond
	if p := From(busy); p.Status != http.StatusConflict || p.Headers.Get("Retry-After") != "2" {
		t.Errorf("conflict with RetryAfter: status %d, Retry-After %q", p.Status, p.Headers.Get("Retry-After"))
	}
	wrapped := fmt.Errorf("charge row: %w", errkind.NotFoundErr("gone"))
	if p, ok := Of(wrapped); !ok || p.Status != http.StatusNotFound {
		t.Errorf("Of(wrapped not found) = %v, %v", p, ok)
	}
	if _, ok := Of(fmt.Errorf("plain")); ok {
		t.Error("Of(plain error) reports a problem")
	}
}

// legacyValidation is problem.Validation as it was written before kinds.
func legacyValidation(errs []FieldError) *Problem {
	p := New(http.StatusBadRequest, "validation", "Invalid request", "One or more fields are invalid.", "")
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
