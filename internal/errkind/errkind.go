// Package errkind is how the domain, the core, storage and the batch runner
// say what went wrong without speaking HTTP: an error has a Kind (invalid,
// not found, conflict, …), the spec's three-digit code when one applies, and
// for invalid input one FieldError per field. Only the HTTP edge turns a
// kind into a status and an RFC 9457 problem, through one table
// (internal/problem, kinds; docs/errors.md). This package imports no
// net/http.
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
	TooLarge              // the input exceeds a size limit
	UnsupportedMedia      // the input's media type is not accepted
	RateLimited           // too many calls; RetryAfter says when to come back
	Unavailable           // a dependency did not answer; retrying is safe
)

var names = [...]string{"unknown", "invalid", "unauthorized", "forbidden", "not found", "conflict",
	"too large", "unsupported media", "rate limited", "unavailable"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(names) {
		return "unknown"
	}
	return names[k]
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
	Detail string     // for people; the problem's detail
	Code   codes.Code // the spec's code, or empty
	// Fields are the invalid fields of an Invalid error; not nil marks a
	// per-field validation error.
	Fields []FieldError
	// RetryAfter, when positive, is how long the caller should wait.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Kind.String()
	}
	return e.Kind.String() + ": " + e.Detail
}

// New returns an error of kind k.
func New(k Kind, detail string, code codes.Code) *Error {
	return &Error{Kind: k, Detail: detail, Code: code}
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

// NotFoundErr is a NotFound error with the spec's code for a missing entity.
func NotFoundErr(detail string) *Error { return New(NotFound, detail, codes.EntityNotFound) }

// ConflictErr is a Conflict error.
func ConflictErr(detail string, code codes.Code) *Error { return New(Conflict, detail, code) }

// UnavailableErr is an Unavailable error with the spec's system-error code.
func UnavailableErr(detail string) *Error { return New(Unavailable, detail, codes.SystemError) }

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
