package adyenmock

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Front plays what Adyen's test platform does behind the Checkout API, for
// the calls the connector makes, with the test data Adyen publishes:
//
//   - "Test card numbers": 4111 1111 1111 1111 (and any other number) is
//     authorised; 4212 3456 7891 0006 asks for a 3-D Secure 2 challenge:
//     RedirectShopper with a redirect action, or ChallengeShopper with a
//     threeDS2 action when the request prefers native 3-D Secure. A request
//     with shopperInteraction Moto or attemptAuthentication "never" is
//     authorised without one.
//
//   - "Testing result codes and refusal reasons": paymentMethod.holderName
//     set to one of testHolders gives that resultCode, refusalReason and
//     refusalReasonCode.
//
//   - "PENDING" as the holder name is the same table's row 13: resultCode
//     Received, and the payment's AUTHORISATION webhook comes when the test
//     calls Settle.
//
//   - "API idempotency": an Idempotency-Key the front has answered gets the
//     first answer again and nothing more happens. Whatever the body: Adyen's
//     page does not say whether it compares bodies, and the connector does
//     not rely on it.
//
//   - The reversal (POST /payments/{psp}/reversals; Adyen's "Reversal"
//     page): it cancels the payment when it is authorised and nothing of it
//     was refunded (the front does not capture: a refund stands for a
//     capture), and refunds what is left of it when part was refunded (a
//     captured payment), and queues a CANCEL_OR_REFUND webhook for the
//     payment's whole amount, success true with additionalData
//     modification.action "cancel" or "refund", or success false when
//     there was nothing to reverse (refused, pending, cancelled, refunded
//     in full).
//
//   - The technical cancel (POST /cancels, by the reference the payment was
//     sent with; Adyen's "Cancel" page): it cancels the authorised payment
//     of that reference when the front holds one it has not refunded (the
//     front does not capture: a refund stands for a capture), and queues a
//     TECHNICAL_CANCEL webhook, success true when it cancelled one, false
//     otherwise (no payment of that reference, or one not authorised or
//     refunded). A payment sent after the cancel is not refused: Adyen's
//     pages do not say what it does then, and the service does not rely
//     on it.
//
// Every answer and webhook it makes is also counted (Authorisations,
// TechnicalCancels, Reversals), so a test can prove a payment was
// authorised once. It queues the standard webhooks Adyen would send
// (AUTHORISATION, REFUND, REFUND_FAILED, CANCELLATION, CANCEL_OR_REFUND,
// TECHNICAL_CANCEL, and CHARGEBACK on request), HMAC-signed as Adyen signs them; Deliver posts them. Safe for
// concurrent use.
type Front struct {
	APIKey  string // the X-API-Key it accepts
	HMACKey string // hex key that signs the webhooks
	// PublicURL is the front's own address, for the 3-D Secure page the
	// payer opens (set by Run).
	PublicURL string

	mu       sync.Mutex
	seq      int64
	answers  map[string]stored // by Idempotency-Key
	payments map[string]*payment
	authz    map[string]int // merchant reference → authorisations
	tcancels map[string]int // payment reference → technical cancels processed
	reversal map[string]int // payment reference → reversals processed
	queue    []Item
	lose     map[string]time.Duration // path → delay before the next answer on it
	slow     map[string]time.Duration // path → processing time of the next call on it
	busy     map[string]bool          // Idempotency-Keys being processed
	account  string                   // SetMerchantAccount
	inFlight int                      // 704 answers given
	requests int
}

type stored struct {
	status int
	body   []byte
}

type payment struct {
	psp, reference, currency, merchantAccount string
	value, refunded                           int64
	status                                    string // authorised, refused, pending, challenge, cancelled
	metadata                                  map[string]string
}

// Item is a NotificationRequestItem as Adyen sends it.
type Item struct {
	AdditionalData      map[string]string `json:"additionalData,omitempty"`
	Amount              Amount            `json:"amount"`
	EventCode           string            `json:"eventCode"`
	EventDate           string            `json:"eventDate"`
	MerchantAccountCode string            `json:"merchantAccountCode"`
	MerchantReference   string            `json:"merchantReference"`
	OriginalReference   string            `json:"originalReference,omitempty"`
	PaymentMethod       string            `json:"paymentMethod,omitempty"`
	PSPReference        string            `json:"pspReference"`
	Reason              string            `json:"reason,omitempty"`
	Success             string            `json:"success"`
}

// Amount is Adyen's Amount.
type Amount struct {
	Currency string `json:"currency"`
	Value    int64  `json:"value"`
}

// testHolders are the refused rows of Adyen's "Values for testing refusal
// reasons" table ("Testing result codes and refusal reasons",
// docs.adyen.com/development-resources/testing/result-codes): holderName →
// resultCode, refusalReason, refusalReasonCode. Only rows read on that page
// (codes 0–16) are played; its later rows (FRAUD, CVC_DECLINED, ...) are not
// in the stored copy, so a holder name outside this table is authorised.
var testHolders = map[string][3]string{
	"UNKNOWN":              {"Error", "Unknown", "0"},
	"DECLINED":             {"Refused", "Refused", "2"},
	"REFERRAL":             {"Refused", "Referral", "3"},
	"ERROR":                {"Error", "Acquirer Error", "4"},
	"BLOCK_CARD":           {"Refused", "Blocked Card", "5"},
	"CARD_EXPIRED":         {"Refused", "Expired Card", "6"},
	"INVALID_AMOUNT":       {"Refused", "Invalid Amount", "7"},
	"INVALID_CARD_NUMBER":  {"Refused", "Invalid Card Number", "8"},
	"ISSUER_UNAVAILABLE":   {"Refused", "Issuer Unavailable", "9"},
	"NOT_SUPPORTED":        {"Refused", "Not supported", "10"},
	"NOT_3D_AUTHENTICATED": {"Refused", "3D Not Authenticated", "11"},
	"NOT_ENOUGH_BALANCE":   {"Refused", "Not enough balance", "12"},
	"ACQUIRER_FRAUD":       {"Refused", "Acquirer Fraud", "14"},
	"CANCELLED":            {"Refused", "Cancelled", "15"},
	"SHOPPER_CANCELLED":    {"Refused", "Shopper Cancelled", "16"},
}

// PendingHolder is the same table's row 13: resultCode Received, no
// refusal; the payment's AUTHORISATION webhook settles it.
const PendingHolder = "PENDING"

// ThreeDSCard is Adyen's 3-D Secure 2 test card that is challenged.
const ThreeDSCard = "4212345678910006"

// NewFront returns a front accepting apiKey and signing with hmacKey (hex).
func NewFront(apiKey, hmacKey string) *Front {
	return &Front{APIKey: apiKey, HMACKey: hmacKey, answers: map[string]stored{},
		payments: map[string]*payment{}, authz: map[string]int{}, tcancels: map[string]int{}, reversal: map[string]int{}, lose: map[string]time.Duration{},
		slow: map[string]time.Duration{}, busy: map[string]bool{}}
}

// SetMerchantAccount makes account the only merchant account the front's
// API key reaches ("" any): the check of a saved account tells them apart.
func (f *Front) SetMerchantAccount(account string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.account = account
}

// LoseNextAnswer makes the next answer on path (e.g. "/payments") wait d
// after the work is done and recorded, as a reply lost on the way back: the
// caller times out, and its retry must meet the stored answer.
func (f *Front) LoseNextAnswer(path string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lose[path] = d
}

// SlowNextCall makes the next call on path take d before its work is done
// and recorded, whether or not the caller waits. Meanwhile a request under
// the same Idempotency-Key is answered as Adyen answers a key still in
// progress: 422, errorCode 704, "request already processed or in progress"
// (InProgressAnswers counts them).
func (f *Front) SlowNextCall(path string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slow[path] = d
}

// InProgressAnswers is how many 704 answers the front gave.
func (f *Front) InProgressAnswers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight
}

// Authorisations is how many times the front authorised a payment with
// this merchant reference.
func (f *Front) Authorisations(reference string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.authz[reference]
}

// TechnicalCancels is how many technical cancels (POST /cancels) the front
// processed for this payment reference; a replay of an Idempotency-Key it
// answered is not one more.
func (f *Front) TechnicalCancels(reference string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tcancels[reference]
}

// Reversals is how many reversals (POST /payments/{psp}/reversals) the
// front processed for payments made with this merchant reference; a replay
// of an Idempotency-Key it answered is not one more.
func (f *Front) Reversals(reference string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reversal[reference]
}

// Live is how many payments made with this merchant reference still hold
// the shopper's money: authorised, and neither cancelled nor refunded in
// full.
func (f *Front) Live(reference string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.payments {
		if p.reference == reference && p.status == "authorised" && p.refunded < p.value {
			n++
		}
	}
	return n
}

// Refunded is the total refunded of the payment pspReference, in minor
// units.
func (f *Front) Refunded(psp string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.payments[psp]; p != nil {
		return p.refunded
	}
	return 0
}

// Requests is how many requests reached the front (after Prism let them
// through).
func (f *Front) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/threeds" {
		f.challengePage(w, r)
		return
	}
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, serviceError(405, "000", "Method not allowed", "validation"))
		return
	}
	if !hmac.Equal([]byte(r.Header.Get("X-API-Key")), []byte(f.APIKey)) {
		writeJSON(w, http.StatusUnauthorized, serviceError(401, "000", "HTTP Status Response - Unauthorized", "security"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.requests++
	if s, ok := f.answers[key]; ok && key != "" {
		f.mu.Unlock()
		w.Header().Set("Idempotency-Key", key)
		writeRaw(w, s.status, s.body)
		return
	}
	if key != "" && f.busy[key] {
		f.inFlight++
		f.mu.Unlock()
		writeJSON(w, http.StatusUnprocessableEntity, serviceError(422, "704", "request already processed or in progress", "validation"))
		return
	}
	if d := f.slow[r.URL.Path]; d > 0 {
		delete(f.slow, r.URL.Path)
		if key != "" {
			f.busy[key] = true
		}
		f.mu.Unlock()
		time.Sleep(d) // the work goes on even if the caller has gone
		f.mu.Lock()
		delete(f.busy, key)
	}
	status, answer := f.handle(r.URL.Path, body)
	raw, _ := json.Marshal(answer)
	if key != "" && status < 500 {
		f.answers[key] = stored{status, raw}
	}
	delay := f.lose[r.URL.Path]
	delete(f.lose, r.URL.Path)
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return // the answer is lost: the caller gave up
		}
	}
	if key != "" {
		w.Header().Set("Idempotency-Key", key)
	}
	writeRaw(w, status, raw)
}

// handle does the work of one call; f.mu is held.
func (f *Front) handle(path string, body []byte) (int, any) {
	switch {
	case path == "/paymentMethods":
		return f.paymentMethods(body)
	case path == "/payments":
		return f.pay(body)
	case path == "/payments/details":
		return f.details(body)
	case path == "/cancels":
		return f.technicalCancel(body)
	case strings.HasPrefix(path, "/payments/") && strings.HasSuffix(path, "/refunds"):
		return f.refund(strings.TrimSuffix(strings.TrimPrefix(path, "/payments/"), "/refunds"), body)
	case strings.HasPrefix(path, "/payments/") && strings.HasSuffix(path, "/reversals"):
		return f.reverse(strings.TrimSuffix(strings.TrimPrefix(path, "/payments/"), "/reversals"), body)
	case strings.HasPrefix(path, "/payments/") && strings.HasSuffix(path, "/cancels"):
		return f.cancel(strings.TrimSuffix(strings.TrimPrefix(path, "/payments/"), "/cancels"), body)
	}
	return http.StatusNotFound, serviceError(404, "000", "Not found", "validation")
}

// paymentMethods answers the harmless call that checks an account: the
// card schemes for the front's merchant account, 403 901 ("Invalid
// Merchant Account") for any other, as Adyen answers a key that does not
// reach the account.
func (f *Front) paymentMethods(body []byte) (int, any) {
	var req struct {
		MerchantAccount string `json:"merchantAccount"`
	}
	_ = json.Unmarshal(body, &req)
	if f.account != "" && req.MerchantAccount != f.account {
		return http.StatusForbidden, serviceError(403, "901", "Invalid Merchant Account", "security")
	}
	return http.StatusOK, map[string]any{"paymentMethods": []map[string]any{
		{"name": "Cards", "type": "scheme", "brands": []string{"visa", "mc", "amex"}},
	}}
}

type payRequest struct {
	Amount          Amount `json:"amount"`
	MerchantAccount string `json:"merchantAccount"`
	Reference       string `json:"reference"`
	ReturnURL       string `json:"returnUrl"`
	PaymentMethod   struct {
		Type       string `json:"type"`
		Number     string `json:"number"`
		HolderName string `json:"holderName"`
	} `json:"paymentMethod"`
	ShopperInteraction string `json:"shopperInteraction"`
	AuthenticationData *struct {
		AttemptAuthentication string `json:"attemptAuthentication"`
		ThreeDSRequestData    *struct {
			NativeThreeDS string `json:"nativeThreeDS"`
		} `json:"threeDSRequestData"`
	} `json:"authenticationData"`
	Metadata map[string]string `json:"metadata"`
}

func (f *Front) psp() string {
	f.seq++
	return fmt.Sprintf("99%014d", f.seq)
}

func (f *Front) pay(body []byte) (int, any) {
	var req payRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return http.StatusBadRequest, serviceError(400, "702", "Structure of the request is invalid", "validation")
	}
	if req.PaymentMethod.Number == "" || req.Amount.Value <= 0 {
		// A request without card data, or for nothing (what Lookup sends):
		// refused before any authorisation.
		return http.StatusUnprocessableEntity, serviceError(422, "000", "Required field 'number' or a positive amount is missing", "validation")
	}
	p := &payment{psp: f.psp(), reference: req.Reference, currency: req.Amount.Currency, value: req.Amount.Value,
		merchantAccount: req.MerchantAccount, metadata: req.Metadata}
	f.payments[p.psp] = p
	resp := map[string]any{"pspReference": p.psp, "merchantReference": req.Reference,
		"amount": Amount{Currency: req.Amount.Currency, Value: req.Amount.Value}}
	holder := strings.ToUpper(strings.TrimSpace(req.PaymentMethod.HolderName))
	noChallenge := req.ShopperInteraction == "Moto" || req.AuthenticationData != nil && req.AuthenticationData.AttemptAuthentication == "never"
	switch t, refused := testHolders[holder]; {
	case refused:
		p.status = "refused"
		resp["resultCode"], resp["refusalReason"], resp["refusalReasonCode"] = t[0], t[1], t[2]
		f.notify(p, "AUTHORISATION", false, t[1])
	case holder == PendingHolder:
		p.status = "pending"
		resp["resultCode"] = "Received"
	case req.PaymentMethod.Number == ThreeDSCard && !noChallenge:
		p.status = "challenge"
		native := req.AuthenticationData != nil && req.AuthenticationData.ThreeDSRequestData != nil &&
			req.AuthenticationData.ThreeDSRequestData.NativeThreeDS == "preferred"
		if native {
			resp["resultCode"] = "ChallengeShopper"
			resp["action"] = map[string]any{"type": "threeDS2", "subtype": "challenge", "paymentMethodType": "scheme",
				"token": base64.StdEncoding.EncodeToString([]byte(p.psp)), "authorisationToken": p.psp}
		} else {
			resp["resultCode"] = "RedirectShopper"
			resp["action"] = map[string]any{"type": "redirect", "method": "GET", "paymentMethodType": "scheme",
				"url": f.PublicURL + "/threeds?psp=" + p.psp + "&returnUrl=" + urlQueryEscape(req.ReturnURL)}
		}
		delete(resp, "pspReference") // Adyen gives the PSP reference with the result, after the challenge
	default:
		f.authorise(p)
		resp["resultCode"] = "Authorised"
	}
	return http.StatusOK, resp
}

func (f *Front) authorise(p *payment) {
	p.status = "authorised"
	f.authz[p.reference]++
	f.notify(p, "AUTHORISATION", true, "")
}

// RedirectResult is the redirectResult the front's challenge page appends
// to the returnUrl when the payer passes (or fails) the challenge.
func RedirectResult(psp string, passed bool) string {
	v := "N"
	if passed {
		v = "Y"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(psp + ":" + v))
}

func (f *Front) details(body []byte) (int, any) {
	var req struct {
		Details map[string]string `json:"details"`
	}
	_ = json.Unmarshal(body, &req)
	raw := req.Details["redirectResult"]
	if raw == "" {
		raw = req.Details["threeDSResult"]
	}
	dec, err := base64.RawURLEncoding.DecodeString(raw)
	psp, verdict, _ := strings.Cut(string(dec), ":")
	p := f.payments[psp]
	if err != nil || p == nil || p.status != "challenge" {
		return http.StatusUnprocessableEntity, serviceError(422, "101", "Invalid payment details", "validation")
	}
	resp := map[string]any{"pspReference": p.psp, "merchantReference": p.reference,
		"amount": Amount{Currency: p.currency, Value: p.value}}
	if verdict == "Y" {
		f.authorise(p)
		resp["resultCode"] = "Authorised"
	} else {
		p.status = "refused"
		resp["resultCode"], resp["refusalReason"], resp["refusalReasonCode"] = "Refused", "3D Not Authenticated", "11"
		f.notify(p, "AUTHORISATION", false, "3D Not Authenticated")
	}
	return http.StatusOK, resp
}

// Settle ends a Pending payment as Adyen would later, by its AUTHORISATION
// webhook (queued).
func (f *Front) Settle(reference string, authorised bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.payments {
		if p.reference == reference && p.status == "pending" {
			if authorised {
				f.authorise(p)
			} else {
				p.status = "refused"
				f.notify(p, "AUTHORISATION", false, "Refused")
			}
			return nil
		}
	}
	return errors.New("adyenmock: no pending payment " + reference)
}

func (f *Front) refund(psp string, body []byte) (int, any) {
	var req struct {
		Amount          Amount `json:"amount"`
		MerchantAccount string `json:"merchantAccount"`
		Reference       string `json:"reference"`
	}
	_ = json.Unmarshal(body, &req)
	p := f.payments[psp]
	if p == nil || p.status != "authorised" {
		return http.StatusUnprocessableEntity, serviceError(422, "167", "Original pspReference required for this operation", "validation")
	}
	refundPSP := f.psp()
	ok := req.Amount.Currency == p.currency && p.refunded+req.Amount.Value <= p.value
	it := f.item(p, "REFUND", ok, "")
	it.PSPReference, it.OriginalReference, it.MerchantReference, it.Amount = refundPSP, p.psp, req.Reference, req.Amount
	if ok {
		p.refunded += req.Amount.Value
	} else {
		it.Reason = "Insufficient balance on payment"
	}
	f.queue = append(f.queue, it)
	return http.StatusCreated, map[string]any{"merchantAccount": req.MerchantAccount, "paymentPspReference": psp,
		"pspReference": refundPSP, "reference": req.Reference, "status": "received", "amount": req.Amount}
}

func (f *Front) cancel(psp string, body []byte) (int, any) {
	var req struct {
		MerchantAccount string `json:"merchantAccount"`
		Reference       string `json:"reference"`
	}
	_ = json.Unmarshal(body, &req)
	p := f.payments[psp]
	if p == nil {
		return http.StatusUnprocessableEntity, serviceError(422, "167", "Original pspReference required for this operation", "validation")
	}
	cancelPSP := f.psp()
	ok := p.status == "authorised" && p.refunded == 0
	if ok {
		p.status = "cancelled"
	}
	it := f.item(p, "CANCELLATION", ok, "")
	it.PSPReference, it.OriginalReference = cancelPSP, p.psp
	f.queue = append(f.queue, it)
	return http.StatusCreated, map[string]any{"merchantAccount": req.MerchantAccount, "paymentPspReference": psp,
		"pspReference": cancelPSP, "reference": req.Reference, "status": "received"}
}

// reverse cancels the authorised payment psp, or refunds what is left of
// it when part was refunded, and queues the CANCEL_OR_REFUND webhook saying
// whether and how (modification.action).
func (f *Front) reverse(psp string, body []byte) (int, any) {
	var req struct {
		MerchantAccount string `json:"merchantAccount"`
		Reference       string `json:"reference"`
	}
	_ = json.Unmarshal(body, &req)
	p := f.payments[psp]
	if p == nil {
		return http.StatusUnprocessableEntity, serviceError(422, "167", "Original pspReference required for this operation", "validation")
	}
	f.reversal[p.reference]++
	reversalPSP := f.psp()
	it := f.item(p, "CANCEL_OR_REFUND", false, "")
	it.PSPReference, it.OriginalReference, it.MerchantReference = reversalPSP, p.psp, req.Reference
	switch {
	case p.status == "authorised" && p.refunded == 0:
		p.status = "cancelled"
		it.Success, it.AdditionalData["modification.action"] = "true", "cancel"
	case p.status == "authorised" && p.refunded < p.value:
		p.refunded = p.value
		it.Success, it.AdditionalData["modification.action"] = "true", "refund"
	default:
		it.Reason = "Nothing to reverse"
	}
	f.queue = append(f.queue, it)
	return http.StatusCreated, map[string]any{"merchantAccount": req.MerchantAccount, "paymentPspReference": psp,
		"pspReference": reversalPSP, "reference": req.Reference, "status": "received"}
}

// technicalCancel cancels the authorised, unrefunded payment sent with
// paymentReference, if the front holds one, and queues the
// TECHNICAL_CANCEL webhook saying whether it did.
func (f *Front) technicalCancel(body []byte) (int, any) {
	var req struct {
		MerchantAccount  string `json:"merchantAccount"`
		PaymentReference string `json:"paymentReference"`
		Reference        string `json:"reference"`
	}
	_ = json.Unmarshal(body, &req)
	f.tcancels[req.PaymentReference]++
	var p *payment
	for _, q := range f.payments {
		if q.reference == req.PaymentReference && (p == nil || q.status == "authorised") {
			p = q
		}
	}
	cancelPSP := f.psp()
	ok := p != nil && p.status == "authorised" && p.refunded == 0
	it := Item{AdditionalData: map[string]string{}, EventCode: "TECHNICAL_CANCEL",
		EventDate: time.Now().UTC().Format(time.RFC3339), MerchantAccountCode: req.MerchantAccount,
		MerchantReference: req.PaymentReference, PaymentMethod: "visa"}
	if p != nil {
		it = f.item(p, "TECHNICAL_CANCEL", ok, "")
		it.OriginalReference = p.psp
	}
	if ok {
		p.status = "cancelled"
	}
	it.PSPReference, it.Success = cancelPSP, strconv.FormatBool(ok)
	f.queue = append(f.queue, it)
	resp := map[string]any{"merchantAccount": req.MerchantAccount, "paymentReference": req.PaymentReference,
		"pspReference": cancelPSP, "status": "received"}
	if req.Reference != "" {
		resp["reference"] = req.Reference
	}
	return http.StatusCreated, resp
}

// Chargeback queues a CHARGEBACK webhook for the payment with this merchant
// reference (Adyen's test platform raises one from its Customer Area).
func (f *Front) Chargeback(reference string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.payments {
		if p.reference == reference && p.status == "authorised" {
			it := f.item(p, "CHARGEBACK", true, "")
			it.PSPReference, it.OriginalReference = f.psp(), p.psp
			it.AdditionalData["chargebackReasonCode"] = "10.4"
			f.queue = append(f.queue, it)
			return nil
		}
	}
	return errors.New("adyenmock: no authorised payment " + reference)
}

func (f *Front) item(p *payment, event string, success bool, reason string) Item {
	ad := map[string]string{}
	for k, v := range p.metadata {
		ad["metadata."+k] = v
	}
	return Item{AdditionalData: ad, Amount: Amount{Currency: p.currency, Value: p.value}, EventCode: event,
		EventDate: time.Now().UTC().Format(time.RFC3339), MerchantAccountCode: p.merchantAccount,
		MerchantReference: p.reference, PaymentMethod: "visa", PSPReference: p.psp, Reason: reason,
		Success: strconv.FormatBool(success)}
}

func (f *Front) notify(p *payment, event string, success bool, reason string) {
	f.queue = append(f.queue, f.item(p, event, success, reason))
}

// Webhooks returns the queued webhook items, signed, and empties the queue.
func (f *Front) Webhooks() []Item {
	f.mu.Lock()
	q := f.queue
	f.queue = nil
	f.mu.Unlock()
	for i := range q {
		q[i].AdditionalData["hmacSignature"] = f.sign(q[i])
	}
	return q
}

// sign is Adyen's HMAC signature of an item: HMAC-SHA256 with the hex key
// over pspReference:originalReference:merchantAccountCode:merchantReference:
// value:currency:eventCode:success, base64 ("Verify HMAC signatures").
func (f *Front) sign(it Item) string {
	key, _ := hex.DecodeString(f.HMACKey)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join([]string{it.PSPReference, it.OriginalReference, it.MerchantAccountCode, it.MerchantReference,
		strconv.FormatInt(it.Amount.Value, 10), it.Amount.Currency, it.EventCode, it.Success}, ":")))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Body wraps items as Adyen's standard webhook body.
func Body(items []Item) []byte {
	type wrap struct {
		Item Item `json:"NotificationRequestItem"`
	}
	n := struct {
		Live  string `json:"live"`
		Items []wrap `json:"notificationItems"`
	}{Live: "false"}
	for _, it := range items {
		n.Items = append(n.Items, wrap{it})
	}
	b, _ := json.Marshal(n)
	return b
}

// Deliver posts the queued webhooks to url in one standard notification,
// as Adyen does, and wants "[accepted]" back.
func (f *Front) Deliver(ctx context.Context, url string) error {
	items := f.Webhooks()
	if len(items) == 0 {
		return nil
	}
	return Post(ctx, url, items)
}

// Post sends items, signed (Webhooks), to url as one standard
// notification; nil once it answered [accepted]. A caller that keeps
// items it could not deliver posts them again, as Adyen retries.
func Post(ctx context.Context, url string, items []Item) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(Body(items))))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != "[accepted]" {
		return fmt.Errorf("adyenmock: webhook answered %d %q", resp.StatusCode, b)
	}
	return nil
}

// challengePage is the issuer's page the redirect action opens: two links
// back to the returnUrl with the redirectResult of a pass and of a fail.
func (f *Front) challengePage(w http.ResponseWriter, r *http.Request) {
	psp, ret := r.URL.Query().Get("psp"), r.URL.Query().Get("returnUrl")
	sep := "?"
	if strings.Contains(ret, "?") {
		sep = "&"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><title>3-D Secure 2 test challenge</title>
<a id="pass" href="%s%sredirectResult=%s">Authenticate</a> <a id="fail" href="%s%sredirectResult=%s">Fail</a>`,
		htmlEscape(ret), sep, RedirectResult(psp, true), htmlEscape(ret), sep, RedirectResult(psp, false))
}

func serviceError(status int, code, msg, typ string) map[string]any {
	return map[string]any{"status": status, "errorCode": code, "message": msg, "errorType": typ}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
