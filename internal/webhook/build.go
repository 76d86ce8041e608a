package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
)

// Format is a merchant's notification body format; the values match the
// merchant record's NotificationFormat.
type Format string

const (
	FormatForm Format = "form" // the spec's default; also the zero value
	FormatJSON Format = "json" // the spec's test-environment JSON variant
)

// Content types of the two formats.
const (
	ContentTypeForm = "application/x-www-form-urlencoded"
	ContentTypeJSON = "application/json"
)

// UserAgent identifies the notifier to receivers and their firewalls.
const UserAgent = "payreq-notifier/1"

// Options is everything besides the notification that shapes one attempt.
type Options struct {
	URL    string // the notify URL
	Format Format // "" means FormatForm
	// Decimals is the currency's minor-unit exponent (currency.Lookup(unit)):
	// amounts are rendered with exactly this many places.
	Decimals int32
	// APIKey is the merchant's API key, the X-Signature key.
	APIKey string
	// WebhookSecret is the merchant's "whsec_..." secret: the Standard
	// Webhooks key and, verbatim, the JSON variant's embedded signature key.
	WebhookSecret string
	// PreviousWebhookSecrets are secrets rotated out whose overlap has not
	// ended: webhook-signature carries an entry for each besides the
	// current one (Standard Webhooks lists several, space-separated, for
	// rotation), so a receiver still on the old secret verifies. The JSON
	// body's own signature and X-Signature use the current keys only.
	PreviousWebhookSecrets []string
	// EventID identifies the event and must stay the same across retries and
	// redeliveries: receivers deduplicate on webhook-id = "msg_" + EventID.
	// Empty means the transaction id, which is stable because a transaction
	// reaches a final state once.
	EventID string
	// Now is the attempt time (webhook-timestamp, JSON timestamp); zero means
	// time.Now().
	Now time.Time
}

// Request is a built notification: everything needed to send it once.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// eventIDPattern keeps webhook-id safe in a header and unambiguous in the
// Standard Webhooks signed content, which joins id and timestamp with ".".
var eventIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Build validates n and renders the request for opts.Format, signed with
// X-Signature and the Standard Webhooks headers.
func Build(n Notification, opts Options) (Request, error) {
	if err := n.Validate(); err != nil {
		return Request{}, err
	}
	u, err := url.Parse(opts.URL)
	if err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		// The URL itself is not echoed: it may carry a merchant's token.
		return Request{}, errors.New("webhook: notify URL must be an absolute http(s) URL")
	}
	if opts.Decimals < 0 || opts.Decimals > 18 {
		return Request{}, fmt.Errorf("webhook: decimals %d out of range 0..18", opts.Decimals)
	}
	if opts.APIKey == "" {
		return Request{}, errors.New("webhook: API key is required for X-Signature")
	}
	if _, err := webhookKey(opts.WebhookSecret); err != nil {
		return Request{}, err
	}
	eventID := opts.EventID
	if eventID == "" {
		eventID = strconv.FormatInt(n.TransactionID, 10)
	}
	if !eventIDPattern.MatchString(eventID) {
		return Request{}, errors.New("webhook: event id must be 1-128 characters of A-Z a-z 0-9 _ -")
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}

	var body []byte
	h := http.Header{}
	switch opts.Format {
	case FormatForm, "":
		body = n.FormBody(opts.Decimals)
		h.Set("Content-Type", ContentTypeForm)
	case FormatJSON:
		body = n.JSONBody(opts.Decimals, now, opts.WebhookSecret)
		h.Set("Content-Type", ContentTypeJSON)
	default:
		return Request{}, fmt.Errorf("webhook: unknown format %q", opts.Format)
	}

	msgID := "msg_" + eventID
	sig, err := SignStandardWebhook(msgID, now, body, opts.WebhookSecret)
	if err != nil {
		return Request{}, err
	}
	for _, prev := range opts.PreviousWebhookSecrets {
		old, err := SignStandardWebhook(msgID, now, body, prev)
		if err != nil {
			return Request{}, err
		}
		sig += " " + old
	}
	h.Set("User-Agent", UserAgent)
	h.Set(HeaderXSignature, SignXSignature(body, opts.APIKey))
	h.Set(HeaderWebhookID, msgID)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderWebhookSignature, sig)
	return Request{Method: http.MethodPost, URL: opts.URL, Header: h, Body: body}, nil
}

// HTTPRequest turns r into an *http.Request bound to ctx.
func (r Request) HTTPRequest(ctx context.Context) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return nil, errors.New("webhook: cannot build HTTP request for the notify URL")
	}
	req.Header = r.Header.Clone()
	return req, nil
}
