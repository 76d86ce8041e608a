package adyen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/provider"
)

// The wire types are the few fields of Adyen's Checkout API v71 this
// connector sends and reads, named as in Adyen's OpenAPI description
// (Adyen/adyen-openapi, json/CheckoutService-v71.json; a copy serves
// internal/devstack/adyenmock, and the tests there hold every request to it).

type amount struct {
	Currency string `json:"currency"`
	Value    int64  `json:"value"`
}

// cardDetails is CardDetails with type "scheme": raw card data, which a
// PCI DSS level 1 merchant may send (Adyen's "Raw card data" integration).
type cardDetails struct {
	Type        string `json:"type"`
	Number      string `json:"number,omitempty"`
	ExpiryMonth string `json:"expiryMonth,omitempty"`
	ExpiryYear  string `json:"expiryYear,omitempty"`
	CVC         string `json:"cvc,omitempty"`
	HolderName  string `json:"holderName,omitempty"`
}

type threeDSRequestData struct {
	NativeThreeDS string `json:"nativeThreeDS,omitempty"` // "preferred" or "disabled"
}

type authenticationData struct {
	AttemptAuthentication string              `json:"attemptAuthentication,omitempty"` // "always" or "never"
	ThreeDSRequestData    *threeDSRequestData `json:"threeDSRequestData,omitempty"`
}

type paymentRequest struct {
	Amount             amount              `json:"amount"`
	MerchantAccount    string              `json:"merchantAccount"`
	Reference          string              `json:"reference"`
	ReturnURL          string              `json:"returnUrl"`
	PaymentMethod      cardDetails         `json:"paymentMethod"`
	ShopperInteraction string              `json:"shopperInteraction,omitempty"`
	Channel            string              `json:"channel,omitempty"`
	ShopperEmail       string              `json:"shopperEmail,omitempty"`
	AuthenticationData *authenticationData `json:"authenticationData,omitempty"`
	Metadata           map[string]string   `json:"metadata,omitempty"`
}

type checkoutAction struct {
	Type    string            `json:"type"`
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Data    map[string]string `json:"data,omitempty"`
	Subtype string            `json:"subtype,omitempty"`
	Token   string            `json:"token,omitempty"`
}

// paymentResponse is PaymentResponse and PaymentDetailsResponse (the same
// fields for what is read here).
type paymentResponse struct {
	PSPReference      string            `json:"pspReference,omitempty"`
	ResultCode        string            `json:"resultCode,omitempty"`
	RefusalReason     string            `json:"refusalReason,omitempty"`
	RefusalReasonCode string            `json:"refusalReasonCode,omitempty"`
	MerchantReference string            `json:"merchantReference,omitempty"`
	Amount            *amount           `json:"amount,omitempty"`
	Action            *checkoutAction   `json:"action,omitempty"`
	AdditionalData    map[string]string `json:"additionalData,omitempty"`
}

type paymentDetailsRequest struct {
	Details map[string]string `json:"details"`
}

type refundRequest struct {
	Amount          amount `json:"amount"`
	MerchantAccount string `json:"merchantAccount"`
	Reference       string `json:"reference,omitempty"`
}

// modificationResponse is PaymentRefundResponse, PaymentCancelResponse and
// PaymentReversalResponse: Adyen only acknowledges ("received"); the result
// is a webhook.
type modificationResponse struct {
	PSPReference        string  `json:"pspReference"`
	PaymentPSPReference string  `json:"paymentPspReference"`
	Status              string  `json:"status"`
	Reference           string  `json:"reference,omitempty"`
	Amount              *amount `json:"amount,omitempty"`
}

// cancelRequest is PaymentCancelRequest and PaymentReversalRequest (the
// same two fields).
type cancelRequest struct {
	MerchantAccount string `json:"merchantAccount"`
	Reference       string `json:"reference,omitempty"`
}

// technicalCancelRequest is StandalonePaymentCancelRequest (POST /cancels):
// the payment is named by the reference it was sent with.
type technicalCancelRequest struct {
	MerchantAccount  string `json:"merchantAccount"`
	PaymentReference string `json:"paymentReference"`
	Reference        string `json:"reference,omitempty"`
}

// technicalCancelResponse is StandalonePaymentCancelResponse: status is
// always "received"; the TECHNICAL_CANCEL webhook carries the result.
type technicalCancelResponse struct {
	MerchantAccount  string `json:"merchantAccount"`
	PaymentReference string `json:"paymentReference"`
	PSPReference     string `json:"pspReference"`
	Reference        string `json:"reference,omitempty"`
	Status           string `json:"status"`
}

// APIError is Adyen's ServiceError body with the HTTP status: the request was
// answered and refused (4xx) or failed at Adyen (5xx).
type APIError struct {
	HTTPStatus   int    `json:"-"`
	Status       int    `json:"status,omitempty"`
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorType    string `json:"errorType,omitempty"`
	Message      string `json:"message,omitempty"`
	PSPReference string `json:"pspReference,omitempty"`
	// TransientHeader is Adyen's "Transient-Error: true" response header:
	// nothing reached an issuer, and the same key is processed as new.
	TransientHeader bool `json:"-"`
}

// errInProgress is Adyen's error code for a key whose first request has
// not finished ("request already processed or in progress").
const errInProgress = "704"

// InProgress reports Adyen's answer to a key still being processed: the
// first request may yet authorise, so it is never an outcome.
func (e *APIError) InProgress() bool { return e.ErrorCode == errInProgress }

// Error keeps what identifies the failure; Adyen's message may echo a field
// of the request, so it is not included.
func (e *APIError) Error() string {
	return fmt.Sprintf("adyen: HTTP %d %s %s (psp %s)", e.HTTPStatus, e.ErrorType, e.ErrorCode, e.PSPReference)
}

// transient reports whether the same request may be sent again with the
// same Idempotency-Key: Adyen failed (5xx), asked to slow down (429), said
// so (Transient-Error: true), or is still processing the key's first
// request (704, which comes as a 422 or 409).
func (e *APIError) transient() bool {
	return e.HTTPStatus >= 500 || e.HTTPStatus == http.StatusTooManyRequests || e.TransientHeader || e.InProgress()
}

// post sends body as JSON to path with the API key and the Idempotency-Key,
// and decodes a 2xx answer into out. A call that got no answer (network,
// time-out) or a transient one is sent again, with the same key, up to
// Retries times within ctx: Adyen answers a key it has processed with the
// first answer, so the retry cannot charge twice. Every send is bounded by
// Timeout.
func (p *Provider) post(ctx context.Context, path, key string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var last error
	connected := false // some send reached Adyen: it may have processed the key
	for attempt := 0; attempt <= p.opts.Retries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return p.unanswered(path, connected, fmt.Errorf("adyen: %s: %w (last: %v)", path, ctx.Err(), last))
			case <-time.After(p.backoff(attempt)):
			}
		}
		last = p.send(ctx, path, key, b, out)
		connected = connected || !provider.Unsent(last)
		var ae *APIError
		if last == nil || errors.As(last, &ae) && !ae.transient() {
			return last
		}
		if ctx.Err() != nil {
			break
		}
	}
	return p.unanswered(path, connected, last)
}

// unanswered is the error of a call that got no definite answer: when no
// send ever connected, Adyen never saw the request and nothing was
// processed (provider.ErrNotProcessed); otherwise the outcome is unknown.
func (p *Provider) unanswered(path string, connected bool, err error) error {
	if connected {
		return err
	}
	p.unreachable.Add(1)
	return &provider.NotProcessedError{RetryAfter: time.Second, Cause: fmt.Errorf("adyen: POST %s: could not connect: %w", path, err)}
}

// Unreachable is how many calls found Adyen unreachable (not processed).
func (p *Provider) Unreachable() int64 { return p.unreachable.Load() }

func (p *Provider) backoff(attempt int) time.Duration {
	d := p.opts.RetryBase << (attempt - 1)
	return min(d, 5*time.Second)
}

func (p *Provider) send(ctx context.Context, path, key string, b []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.opts.BaseURL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-API-Key", p.opts.APIKey)
	req.Header.Set("Idempotency-Key", key)
	resp, err := p.opts.HTTPClient.Do(req)
	if err != nil {
		// The URL is ours and holds no secret; the error may say "timeout".
		return fmt.Errorf("adyen: POST %s: no answer: %w", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("adyen: POST %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		ae := &APIError{HTTPStatus: resp.StatusCode}
		_ = json.Unmarshal(raw, ae)
		ae.TransientHeader = strings.EqualFold(strings.TrimSpace(resp.Header.Get("Transient-Error")), "true")
		return ae
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("adyen: POST %s: answer is not JSON (HTTP %s): %w", path, strconv.Itoa(resp.StatusCode), err)
	}
	return nil
}
