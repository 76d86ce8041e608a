package errkind

import (
	"errors"
	"fmt"
	"testing"

	"github.com/payreq/payreq/internal/codes"
)

// TestKindOfWrappedErrors: the kind survives wrapping, and an error without
// one is Unknown, so a caller (the batch runner, the edge) can decide on it.
func TestKindOfWrappedErrors(t *testing.T) {
	err := fmt.Errorf("pay row 3: %w", ConflictErr("Payment request 3 is already paid.", ""))
	if KindOf(err) != Conflict || !Is(err, Conflict) || Is(err, Invalid) {
		t.Errorf("KindOf(wrapped conflict) = %v", KindOf(err))
	}
	if KindOf(errors.New("plain")) != Unknown || KindOf(nil) != Unknown {
		t.Error("an error without a kind must be Unknown")
	}
}

// TestValidationCodeAndDetail: a validation error carries the first field's
// code, and the only field's message as its detail (a summary for several).
func TestValidationCodeAndDetail(t *testing.T) {
	one := Validation([]FieldError{{Field: "amount", Code: codes.InvalidAmount, Detail: "amount must be greater than zero"}})
	if one.Kind != Invalid || one.Code != codes.InvalidAmount || one.Detail != "amount must be greater than zero" {
		t.Errorf("one field: %+v", one)
	}
	two := Validation([]FieldError{{Field: "email", Code: codes.InvalidEmail, Detail: "bad"}, {Field: "amount", Code: codes.InvalidAmount, Detail: "bad"}})
	if two.Code != codes.InvalidEmail || two.Detail != "One or more fields are invalid." || len(two.Fields) != 2 {
		t.Errorf("two fields: %+v", two)
	}
	if Validation(nil).Fields == nil {
		t.Error("a validation error without fields must still be marked as one (non-nil Fields)")
	}
	if BadInput("x", "").Fields != nil {
		t.Error("BadInput is not a per-field error")
	}
}

// TestWrapKeepsTheCause: a kind wraps its cause, so errors.Is and errors.As
// still find it (storage wraps DynamoDB's answer), and the message names it.
func TestWrapKeepsTheCause(t *testing.T) {
	cause := errors.New("ConditionalCheckFailedException")
	err := fmt.Errorf("lease request 5: %w", Wrap(Conflict, cause, "payment request 5 changed"))
	if !errors.Is(err, cause) || !Is(err, Conflict) {
		t.Errorf("errors.Is(cause) = %v, kind %v", errors.Is(err, cause), KindOf(err))
	}
	if got := err.Error(); got != "lease request 5: conflict: payment request 5 changed: ConditionalCheckFailedException" {
		t.Errorf("message %q", got)
	}
}
