// Package errkind is how the domain, the core, storage and the batch runner
// say what went wrong without speaking HTTP: an error has a Kind (invalid,
// not found, conflict, …), the spec's three-digit code when one applies, for
// invalid input one FieldError per field, and the error that caused it.
// Storage answers in kinds too (a missing item is NotFound, a conditional
// write that found another state Conflict, a create that found its key
// taken Exists), wrapping DynamoDB's own error, so callers branch on the
// kind (Is) and never on a storage package's errors. Only the HTTP edge
// turns a kind into a status and an RFC 9457 problem, through one table
// (internal/problem; docs/errors.md). This package imports no net/http.
package errkind

import (
	"errors"
	"time"

	"github.com/payreq/payreq/internal/codes"
)

// Kind is the category of an error.
type Kind int

// The kinds. Unknown is what KindOf answers for an error that has none: the
// edge treats it as a failure of the service.
const (
	Unknown          Kind = iota
	Invalid               // the input breaks a rule; with Fields: per field
	Unauthorized          // missing or wrong credentials
	Forbidden             // authenticated, not allowed
	NotFound              // no such object (for this caller)
	Conflict              // the object's state refuses the operation
	Exists                // a create found its key taken; nothing was written
	TooLarge              // the input exceeds a size limit
	UnsupportedMedia      // the input's media type is not accepted
	RateLimited           // too many calls; RetryAfter says when to come back
	Unavailable           // a dependency did not answer; retrying is safe
)

var names = [...]string{"unknown", "invalid", "unauthorized", "forbidden", "not found", "conflict", "exists",
	"too large", "unsupported media", "rate limited", "unavailable"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(names) {
		return "unknown"
	}
	return names[k]
}

// Kinds lists every kind but Unknown (the edge's table has one entry each).
func Kinds() []Kind {
	out := make([]Kind, 0, len(names)-1)
	for k := Invalid; int(k) < len(names); k++ {
		out = append(out, k)
	}
	return out
}

// Reason tells apart, within a kind, the cases the API documents as problem
// types of their own (docs/errors.md, "Problems without a spec code"); the
// edge's table gives each its type, and IdempotencyKeyReused its status.
type Reason int

// The reasons; NoReason is the kind's own problem.
const (
	NoReason              Reason = iota
	IdempotencyKeyInvalid        // Invalid: the Idempotency-Key header is empty, repeated or too long
	IdempotencyKeyInUse          // Conflict: a request with the same key is still being processed
	IdempotencyKeyReused         // Conflict: the same key came with a different request
	CheckoutTokenInvalid         // Unauthorized: the checkout token is missing, expired or not this request's
	TooManyAttempts              // RateLimited: too many payment attempts on one payment request
)

var reasonKinds = [...]Kind{
	IdempotencyKeyInvalid: Invalid, IdempotencyKeyInUse: Conflict, IdempotencyKeyReused: Conflict,
	CheckoutTokenInvalid: Unauthorized, TooManyAttempts: RateLimited,
}

// Kind is the kind of an error of reason r.
func (r Reason) Kind() Kind {
	if r <= NoReason || int(r) >= len(reasonKinds) {
		return Unknown
	}
	return reasonKinds[r]
}

// Reasons lists every reason but NoReason.
func Reasons() []Reason {
	out := make([]Reason, 0, len(reasonKinds)-1)
	for r := NoReason + 1; int(r) < len(reasonKinds); r++ {
		out = append(out, r)
	}
	return out
}

// FieldError is one invalid field: its name as the caller sent it, the
// spec's code and a message for people. The JSON names are the problem
// body's errors[] members.
type FieldError struct {
	Field  string     `json:"field"`
	Code   codes.Code `json:"code,omitempty"`
	Detail string     `json:"detail"`
}

// Error is an error of a kind.
type Error struct {
	Kind   Kind
	Reason Reason     // NoReason but for the cases of Reason
	Detail string     // for people; the problem's detail
	Code   codes.Code // the spec's code, or empty
	// Fields are the invalid fields of an Invalid error; not nil marks a
	// per-field validation error.
	Fields []FieldError
	// RetryAfter, when positive, is how long the caller should wait.
	RetryAfter time.Duration
	// Err is the cause (DynamoDB's answer, say), for the logs and for
	// errors.Is and errors.As; never shown to a client.
	Err error
}

func (e *Error) Error() string {
	s := e.Kind.String()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an error of kind k.
func New(k Kind, detail string, code codes.Code) *Error {
	return &Error{Kind: k, Detail: detail, Code: code}
}

// Wrap returns an error of kind k caused by err.
func Wrap(k Kind, err error, detail string) *Error {
	return &Error{Kind: k, Detail: detail, Err: err}
}

// BadInput is an Invalid error about the request as a whole.
func BadInput(detail string, code codes.Code) *Error { return New(Invalid, detail, code) }

// Validation is an Invalid error of fields. Its code is the first field's,
// and its detail the only field's message, or a summary when there are
// several.
func Validation(fields []FieldError) *Error {
	e := &Error{Kind: Invalid, Detail: "One or more fields are invalid.", Fields: fields}
	if e.Fields == nil {
		e.Fields = []FieldError{}
	}
	if len(fields) > 0 {
		e.Code = fields[0].Code
		if len(fields) == 1 {
			e.Detail = fields[0].Detail
		}
	}
	return e
}

// Field is a Validation error of one field.
func Field(field string, code codes.Code, detail string) *Error {
	return Validation([]FieldError{{Field: field, Code: code, Detail: detail}})
}

// NotFoundErr is a NotFound error with the spec's code for a missing entity.
func NotFoundErr(detail string) *Error { return New(NotFound, detail, codes.EntityNotFound) }

// ConflictErr is a Conflict error.
func ConflictErr(detail string, code codes.Code) *Error { return New(Conflict, detail, code) }

// UnavailableErr is an Unavailable error with the spec's system-error code.
func UnavailableErr(detail string) *Error { return New(Unavailable, detail, codes.SystemError) }

// UnauthorizedErr is an Unauthorized error with the spec's code for
// invalid credentials.
func UnauthorizedErr(detail string) *Error {
	return New(Unauthorized, detail, codes.InvalidCredentials)
}

// RateLimitedErr is a RateLimited error: retry after wait.
func RateLimitedErr(detail string, wait time.Duration) *Error {
	return &Error{Kind: RateLimited, Detail: detail, RetryAfter: wait}
}

// Because is an error of reason r (and of r's kind).
func Because(r Reason, detail string, code codes.Code) *Error {
	return &Error{Kind: r.Kind(), Reason: r, Detail: detail, Code: code}
}

// As returns err's *Error, if it has one.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// KindOf is err's kind; Unknown when it has none (nil included).
func KindOf(err error) Kind {
	if e, ok := As(err); ok {
		return e.Kind
	}
	return Unknown
}

// Is reports whether err is of kind k.
func Is(err error, k Kind) bool { return KindOf(err) == k }
