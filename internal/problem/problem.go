// Package problem writes RFC 9457 problem details. Every error response of the
// service goes through it, so clients see one shape everywhere:
// type, title, status, detail, instance, plus the spec code and field errors.
package problem

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

// TypeBase prefixes the "type" URI of every problem; the suffix is a stable slug.
const TypeBase = "https://docs.payreq.dev/problems/"

// FieldError is one entry of the "errors" member of a 400 problem: the
// field error of an errkind.Error, so the edge passes them through as they are.
type FieldError = errkind.FieldError

// Problem is an RFC 9457 problem object with the service's extension members.
type Problem struct {
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Status   int          `json:"status"`
	Detail   string       `json:"detail,omitempty"`
	Instance string       `json:"instance,omitempty"`
	Code     codes.Code   `json:"code,omitempty"`
	Errors   []FieldError `json:"errors,omitempty"`

	// Headers are extra response headers (Retry-After, Allow, ...). Not serialised.
	Headers http.Header `json:"-"`
}

// Error makes *Problem usable as an error, so domain code can return one.
func (p *Problem) Error() string {
	if p.Detail != "" {
		return p.Title + ": " + p.Detail
	}
	return p.Title
}

// New builds a problem; slug becomes the "type" suffix.
func New(status int, slug, title, detail string, code codes.Code) *Problem {
	return &Problem{Type: TypeBase + slug, Title: title, Status: status, Detail: detail, Code: code}
}

// Common problems. Each call returns a fresh value that callers may amend.

func Unauthorized(detail string) *Problem {
	return New(http.StatusUnauthorized, "unauthorized", "Unauthorized", detail, codes.InvalidCredentials)
}

func NotFound(detail string) *Problem {
	return New(http.StatusNotFound, "not-found", "Not Found", detail, codes.EntityNotFound)
}

func BadRequest(detail string, code codes.Code) *Problem {
	return New(http.StatusBadRequest, "bad-request", "Bad Request", detail, code)
}

// Validation is a 400 listing every invalid field; the top-level code is the
// first field's code so clients that read only "code" still get one.
func Validation(errs []FieldError) *Problem {
	p := From(errkind.Validation(errs))
	if errs == nil {
		p.Errors = nil
	}
	return p
}

func Conflict(detail string, code codes.Code) *Problem {
	return New(http.StatusConflict, "conflict", "Conflict", detail, code)
}

func TooLarge(limit int64) *Problem {
	return New(http.StatusRequestEntityTooLarge, "payload-too-large", "Payload Too Large",
		"The request body exceeds "+strconv.FormatInt(limit, 10)+" bytes.", "")
}

func UnsupportedMediaType(detail string) *Problem {
	return New(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported Media Type", detail, "")
}

func Internal() *Problem {
	return New(http.StatusInternalServerError, "internal", "Internal Server Error",
		"An unexpected error occurred; it has been logged. Retry later or contact support with the request id.", codes.SystemError)
}

func Unavailable(detail string) *Problem {
	return New(http.StatusServiceUnavailable, "unavailable", "Service Unavailable", detail, codes.SystemError)
}

// Write sends p as application/problem+json. instance defaults to the request path.
func Write(w http.ResponseWriter, r *http.Request, p *Problem) {
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	for k, vs := range p.Headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// kinds is the one table from an error kind to its HTTP status and problem
// type (docs/errors.md, "Error kinds"). An Invalid error with field errors
// is the "validation" type instead of "bad-request".
var kinds = map[errkind.Kind]struct {
	status      int
	slug, title string
}{
	errkind.Invalid:          {http.StatusBadRequest, "bad-request", "Bad Request"},
	errkind.Unauthorized:     {http.StatusUnauthorized, "unauthorized", "Unauthorized"},
	errkind.Forbidden:        {http.StatusForbidden, "forbidden", "Forbidden"},
	errkind.NotFound:         {http.StatusNotFound, "not-found", "Not Found"},
	errkind.Conflict:         {http.StatusConflict, "conflict", "Conflict"},
	errkind.TooLarge:         {http.StatusRequestEntityTooLarge, "payload-too-large", "Payload Too Large"},
	errkind.UnsupportedMedia: {http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported Media Type"},
	errkind.RateLimited:      {http.StatusTooManyRequests, "rate-limited", "Too Many Requests"},
	errkind.Unavailable:      {http.StatusServiceUnavailable, "unavailable", "Service Unavailable"},
}

// From is the problem of an error kind; an Unknown kind is Internal.
func From(e *errkind.Error) *Problem {
	k, ok := kinds[e.Kind]
	if !ok {
		return Internal()
	}
	p := New(k.status, k.slug, k.title, e.Detail, e.Code)
	if e.Kind == errkind.Invalid && e.Fields != nil {
		p.Type, p.Title, p.Errors = TypeBase+"validation", "Invalid request", e.Fields
	}
	if e.RetryAfter > 0 {
		secs := int64(e.RetryAfter.Round(time.Second) / time.Second)
		p.Headers = http.Header{"Retry-After": {strconv.FormatInt(max(secs, 1), 10)}}
	}
	return p
}

// Of is err's problem: a *Problem as it is, an errkind error through the
// table; false for any other error.
func Of(err error) (*Problem, bool) {
	var p *Problem
	if errors.As(err, &p) {
		return p, true
	}
	if e, ok := errkind.As(err); ok && e.Kind != errkind.Unknown {
		return From(e), true
	}
	return nil, false
}
