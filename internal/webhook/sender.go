package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/payreq/payreq/internal/safehttp"
)

// MaxResponseRead is how much of a receiver's response body is read (and
// discarded). Reading lets the connection be reused; the cap keeps a
// misbehaving receiver from holding the notifier.
const MaxResponseRead = 64 << 10

// maxErrLen bounds the error text stored with an attempt.
const maxErrLen = 300

// Attempt is the record of one delivery attempt.
type Attempt struct {
	At         time.Time     `json:"at"`
	StatusCode int           `json:"statusCode,omitempty"` // 0 when no response arrived
	Latency    time.Duration `json:"latency"`              // until the response was read
	Err        string        `json:"err,omitempty"`        // "" when delivered; never contains the URL or secrets
	RetryAfter time.Duration `json:"retryAfter,omitempty"` // the receiver's Retry-After, capped
}

// Delivered reports whether the receiver accepted the notification (2xx).
func (a Attempt) Delivered() bool {
	return a.Err == "" && a.StatusCode >= 200 && a.StatusCode < 300
}

// Gone reports whether the receiver answered 410 Gone: Standard Webhooks'
// way of saying it wants no more of this delivery.
func (a Attempt) Gone() bool { return a.StatusCode == http.StatusGone }

// Sender POSTs built requests and classifies the outcome.
type Sender struct {
	// Client is normally safehttp.NewClient; nil means a strict one
	// (public addresses, https only). Its redirect policy is overridden
	// whatever it is: a redirect is a failed attempt, never followed.
	Client *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// strictClient is shared so that its transport's connections are reused.
var strictClient = sync.OnceValue(func() *http.Client {
	return safehttp.NewClient(safehttp.Options{RequireHTTPS: true})
})

// Send makes one attempt. Anything but a 2xx answer is a failure: 3xx, 4xx,
// 5xx, a timeout or a connection error.
func (s Sender) Send(ctx context.Context, r Request) Attempt {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	client := s.Client
	if client == nil {
		client = strictClient()
	}
	noRedirects := *client
	noRedirects.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	a := Attempt{At: now()}
	req, err := r.HTTPRequest(ctx)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		a.Latency = now().Sub(a.At)
		a.Err = describe(err)
		return a
	}
	_, readErr := io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseRead))
	_ = resp.Body.Close()
	a.Latency = now().Sub(a.At)
	a.StatusCode = resp.StatusCode
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		// The receiver has accepted; a broken response body does not undo that.
		return a
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		a.Err = fmt.Sprintf("HTTP %d: redirect not followed", resp.StatusCode)
	default:
		a.Err = fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	if readErr != nil {
		a.Err += "; reading response: " + describe(readErr)
	}
	a.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), a.At)
	return a
}

// describe renders a transport error without the URL, which may carry a
// merchant's credentials in its query or user info.
func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	var ne net.Error
	if (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded) {
		msg = "timeout: " + msg
	}
	if len(msg) > maxErrLen {
		msg = strings.ToValidUTF8(msg[:maxErrLen], "")
	}
	return msg
}
