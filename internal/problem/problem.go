// Package problem is the HTTP edge's one table from an error to an RFC 9457
// problem: an error of a kind (internal/errkind) becomes the kind's status
// and type (or its reason's), with the error's detail, spec code and field
// errors; any other error is a 500 that shows nothing of it. Every error
// response of the service is built here, so clients see one shape
// everywhere: type, title, status, detail, instance, plus the spec code and
// field errors (docs/errors.md).
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

// TypeBase prefixes the "type" URI of every problem; the suffix is a stable slug.
const TypeBase = "https://docs.payreq.dev/problems/"

// Problem is an RFC 9457 problem object with the service's extension members.
type Problem struct {
	Type     string               `json:"type"`
	Title    string               `json:"title"`
	Status   int                  `json:"status"`
	Detail   string               `json:"detail,omitempty"`
	Instance string               `json:"instance,omitempty"`
	Code     codes.Code           `json:"code,omitempty"`
	Errors   []errkind.FieldError `json:"errors,omitempty"`

	// Headers are extra response headers (Retry-After, Allow). Not serialised.
	Headers http.Header `json:"-"`
}

type entry struct {
	status      int
	slug, title string
}

// kinds is the one table from an error kind to its HTTP status and problem
// type (docs/errors.md, "Error kinds"). An Invalid error with field errors
// is the "validation" type instead of "bad-request".
var kinds = map[errkind.Kind]entry{
	errkind.Invalid:          {http.StatusBadRequest, "bad-request", "Bad Request"},
	errkind.Unauthorized:     {http.StatusUnauthorized, "unauthorized", "Unauthorized"},
	errkind.Forbidden:        {http.StatusForbidden, "forbidden", "Forbidden"},
	errkind.NotFound:         {http.StatusNotFound, "not-found", "Not Found"},
	errkind.Conflict:         {http.StatusConflict, "conflict", "Conflict"},
	errkind.Exists:           {http.StatusConflict, "conflict", "Conflict"},
	errkind.TooLarge:         {http.StatusRequestEntityTooLarge, "payload-too-large", "Payload Too Large"},
	errkind.UnsupportedMedia: {http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported Media Type"},
	errkind.RateLimited:      {http.StatusTooManyRequests, "rate-limited", "Too Many Requests"},
	errkind.Unavailable:      {http.StatusServiceUnavailable, "unavailable", "Service Unavailable"},
}

// reasons are the problem types of their own within a kind
// (docs/errors.md, "Problems without a spec code").
var reasons = map[errkind.Reason]entry{
	errkind.IdempotencyKeyInvalid: {http.StatusBadRequest, "invalid-idempotency-key", "Bad Request"},
	errkind.IdempotencyKeyInUse:   {http.StatusConflict, "idempotency-key-in-use", "Conflict"},
	errkind.IdempotencyKeyReused:  {http.StatusUnprocessableEntity, "idempotency-key-reused", "Unprocessable Content"},
	errkind.CheckoutTokenInvalid:  {http.StatusUnauthorized, "invalid-checkout-token", "Unauthorized"},
	errkind.TooManyAttempts:       {http.StatusTooManyRequests, "too-many-attempts", "Too Many Requests"},
}

// internal is the problem of an error without a kind: nothing of the error
// reaches the client (the edge logs it).
var internal = entry{http.StatusInternalServerError, "internal", "Internal Server Error"}

const internalDetail = "An unexpected error occurred; it has been logged. Retry later or contact support with the request id."

// From is err's problem: an errkind error through the table, any other
// error (nil included) the internal error.
func From(err error) *Problem {
	e, ok := errkind.As(err)
	if !ok {
		return build(internal, internalDetail, codes.SystemError)
	}
	k, ok := reasons[e.Reason]
	if !ok {
		if k, ok = kinds[e.Kind]; !ok {
			return build(internal, internalDetail, codes.SystemError)
		}
	}
	p := build(k, e.Detail, e.Code)
	if e.Kind == errkind.Invalid && e.Fields != nil && e.Reason == errkind.NoReason {
		p.Type, p.Title = TypeBase+"validation", "Invalid request"
	}
	p.Errors = e.Fields
	if e.RetryAfter > 0 {
		secs := int64(e.RetryAfter.Round(time.Second) / time.Second)
		p.Headers = http.Header{"Retry-After": {strconv.FormatInt(max(secs, 1), 10)}}
	}
	return p
}

// MethodNotAllowed is the answer to a method a route does not have: the
// HTTP edge's own decision (the local gateway's), with the Allow header.
func MethodNotAllowed(detail string, allow []string) *Problem {
	p := build(entry{http.StatusMethodNotAllowed, "method-not-allowed", "Method Not Allowed"}, detail, "")
	p.Headers = http.Header{"Allow": {strings.Join(allow, ", ")}}
	return p
}

func build(k entry, detail string, code codes.Code) *Problem {
	return &Problem{Type: TypeBase + k.slug, Title: k.title, Status: k.status, Detail: detail, Code: code}
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
