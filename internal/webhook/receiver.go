package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// MaxBody bounds what a receiver reads; real notifications are a few
// hundred bytes.
const MaxBody = 1 << 20

// ReadPosted reads a notification POSTed to a receiver: any other method is
// answered 405 with Allow, a body over MaxBody 413. ok is false when an
// answer was written.
func ReadPosted(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "notifications are POSTed", http.StatusMethodNotAllowed)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	return body, true
}

// Check is the outcome of one signature verification in a receiver line.
type Check struct {
	Valid bool   `json:"valid"`
	Error string `json:"error,omitempty"`
}

// Received is the JSON line the receiver prints per notification.
type Received struct {
	ReceivedAt      time.Time      `json:"receivedAt"`
	WebhookID       string         `json:"webhookId,omitempty"`
	Format          Format         `json:"format,omitempty"` // empty for an unknown content type
	ContentType     string         `json:"contentType"`
	Fields          map[string]any `json:"fields,omitempty"`
	ParseError      string         `json:"parseError,omitempty"`
	XSignature      Check          `json:"xSignature"`
	StandardWebhook Check          `json:"standardWebhook"`
	JSONSignature   *Check         `json:"jsonSignature,omitempty"` // JSON variant only
}

// NewReceiver returns a handler for merchants trying out their integration
// (payctl webhooks listen): it answers every notification 200, so nothing is
// retried, and writes one JSON line per notification to out with the fields
// and whether each signature verifies. Keys are never printed.
func NewReceiver(apiKey, webhookSecret string, out io.Writer) http.Handler {
	return &receiver{apiKey: apiKey, secret: webhookSecret, out: out, now: time.Now}
}

type receiver struct {
	apiKey, secret string
	now            func() time.Time
	mu             sync.Mutex // one line at a time on out
	out            io.Writer
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := ReadPosted(w, r)
	if !ok {
		return
	}
	line := rc.inspect(r.Header, body)
	rc.mu.Lock()
	_ = json.NewEncoder(rc.out).Encode(line)
	rc.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (rc *receiver) inspect(h http.Header, body []byte) Received {
	return Inspect(h, body, rc.apiKey, rc.secret, rc.now())
}

// Inspect decodes one received notification and verifies each signature
// whose key is given: the receiver's line, for tools that also act on the
// notification (payctl webhooks listen --forward-to).
func Inspect(h http.Header, body []byte, apiKey, webhookSecret string, now time.Time) Received {
	rc := &receiver{apiKey: apiKey, secret: webhookSecret}
	line := Received{
		ReceivedAt:  now.UTC(),
		WebhookID:   h.Get(HeaderWebhookID),
		ContentType: h.Get("Content-Type"),
	}
	mediaType, _, _ := mime.ParseMediaType(line.ContentType)
	var err error
	switch mediaType {
	case ContentTypeForm:
		line.Format = FormatForm
		line.Fields, err = formFields(body)
	case ContentTypeJSON:
		line.Format = FormatJSON
		line.Fields, err = jsonFields(body)
		c := rc.check(rc.secret, "webhook secret", func() error {
			_, err := VerifyJSONBody(body, rc.secret)
			return err
		})
		line.JSONSignature = &c
	default:
		err = errors.New("unexpected content type")
	}
	if err != nil {
		line.ParseError = err.Error()
	}

	line.XSignature = rc.check(rc.apiKey, "API key", func() error {
		sig := h.Get(HeaderXSignature)
		if sig == "" {
			return errors.New("missing X-Signature header")
		}
		if !VerifyXSignature(body, sig, rc.apiKey) {
			return ErrSignature
		}
		return nil
	})
	line.StandardWebhook = rc.check(rc.secret, "webhook secret", func() error {
		return VerifyStandardWebhook(h, body, rc.secret, now, DefaultTolerance)
	})
	return line
}

// check runs verify when the key it needs was configured.
func (rc *receiver) check(key, name string, verify func() error) Check {
	if key == "" {
		return Check{Error: "no " + name + " configured"}
	}
	if err := verify(); err != nil {
		return Check{Error: err.Error()}
	}
	return Check{Valid: true}
}

func formFields(body []byte) (map[string]any, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, len(v))
	for k := range v {
		m[k] = v.Get(k)
	}
	return m, nil
}

// jsonFields keeps numbers as written, so amounts and ids print exactly.
func jsonFields(body []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}
