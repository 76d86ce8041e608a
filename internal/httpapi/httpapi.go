// Package httpapi is the HTTP plumbing shared by every function: request ids,
// structured access logs, panic recovery, JSON bodies and problem responses.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/problem"
)

type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyLogger
	keyLogAttrs
)

// RequestID returns the request id (API Gateway's, or generated).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(keyRequestID).(string)
	return id
}

// Logger returns the request-scoped logger (carries request_id).
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(keyLogger).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// logAttrs lets inner handlers add fields (merchant_id) to the access log line.
type logAttrs struct{ attrs []slog.Attr }

// AddLogAttrs adds attributes to the request's access log line and logger.
func AddLogAttrs(r *http.Request, attrs ...slog.Attr) *http.Request {
	if la, ok := r.Context().Value(keyLogAttrs).(*logAttrs); ok {
		la.attrs = append(la.attrs, attrs...)
	}
	args := make([]any, len(attrs))
	for i, a := range attrs {
		args[i] = a
	}
	return r.WithContext(context.WithValue(r.Context(), keyLogger, Logger(r.Context()).With(args...)))
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// HSTS is the Strict-Transport-Security value of every response: browsers
// that once reached the service use HTTPS only, for a year, on subdomains too.
const HSTS = "max-age=31536000; includeSubDomains"

// IdempotencyKeyHeader is the header whose repetition Wrap refuses.
const IdempotencyKeyHeader = "Idempotency-Key"

// Wrap adds request id, access logging, panic recovery and the headers every
// response carries (Strict-Transport-Security, X-Request-Id) around h. It
// refuses a repeated Idempotency-Key header with 400: API Gateway joins
// repeated headers with a comma, so "a,b" is refused too (a key is an opaque
// token, never a list).
func Wrap(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := ""
		if gw, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok {
			id = gw.RequestID
		}
		if id == "" {
			id = newRequestID()
		}
		// The adapter copies the whole gateway context into a header; handlers
		// have it in the context already, so drop the copy.
		r.Header.Del(core.APIGwContextHeader)
		r.Header.Del(core.APIGwStageVarsHeader)
		la := &logAttrs{}
		reqLog := log.With("request_id", id)
		ctx := context.WithValue(r.Context(), keyRequestID, id)
		ctx = context.WithValue(ctx, keyLogger, reqLog)
		ctx = context.WithValue(ctx, keyLogAttrs, la)
		r = r.WithContext(ctx)
		w.Header().Set("X-Request-Id", id)
		w.Header().Set("Strict-Transport-Security", HSTS)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				reqLog.Error("panic", "panic", v)
				if sw.status == 0 {
					problem.Write(sw, r, problem.From(nil))
				}
			}
			attrs := []any{"method", r.Method, "route", r.Pattern, "status", sw.status,
				"duration_ms", float64(time.Since(start).Microseconds()) / 1000}
			for _, a := range la.attrs {
				attrs = append(attrs, a)
			}
			reqLog.Info("request", attrs...)
		}()
		if k := r.Header.Values(IdempotencyKeyHeader); len(k) > 1 || (len(k) == 1 && strings.Contains(k[0], ",")) {
			problem.Write(sw, r, problem.From(BadIdempotencyKey("Send exactly one Idempotency-Key header; its value must not contain a comma.", "must be sent once")))
			return
		}
		h.ServeHTTP(sw, r)
	})
}

// HandlerFunc is a handler that may fail; the error becomes a problem response.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

func (f HandlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := f(w, r); err != nil {
		Error(w, r, err)
	}
}

// Error writes err as its problem (problem.From): an errkind error as its
// kind's, a timeout as Unavailable, anything else as a logged 500 that
// shows nothing of it.
func Error(w http.ResponseWriter, r *http.Request, err error) { ErrorAt(w, r, err, r.URL.Path) }

// ErrorAt is Error with the problem's instance given: a route whose path
// holds a secret (a payment link's slug) does not echo it.
func ErrorAt(w http.ResponseWriter, r *http.Request, err error, instance string) {
	switch {
	case errkind.KindOf(err) != errkind.Unknown:
	case errors.Is(err, context.DeadlineExceeded):
		Logger(r.Context()).Error("timeout", "error", err.Error())
		err = &errkind.Error{Kind: errkind.Unavailable, Code: codes.SystemError, Err: err,
			Detail: "A dependency did not answer in time. Retry with the same Idempotency-Key."}
	default:
		Logger(r.Context()).Error("internal error", "error", err.Error())
	}
	p := problem.From(err)
	p.Instance = instance
	problem.Write(w, r, p)
}

// Status is err's status in the one table (problem.From): what Error
// would answer. The dashboard, whose answers are pages, not problems, takes
// its statuses from here.
func Status(err error) int { return problem.From(err).Status }

// BadIdempotencyKey is the error of an Idempotency-Key header that cannot
// be a key (repeated, empty, too long): detail for the problem, why for
// its field error.
func BadIdempotencyKey(detail, why string) *errkind.Error {
	e := errkind.Because(errkind.IdempotencyKeyInvalid, detail, "")
	e.Fields = []errkind.FieldError{{Field: IdempotencyKeyHeader, Detail: why}}
	return e
}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
