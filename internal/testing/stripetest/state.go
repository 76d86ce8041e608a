package stripetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v83/webhook"
)

// What Stripe does after its first answer, and stripe-mock (stateless, one
// fixture per resource) does not: the front plays it once KeepState is
// called. Each rule is Stripe's documented behaviour:
//
//   - Idempotency-Key (docs.stripe.com/api/idempotent_requests): the status
//     and body of the first request with a key are saved once its endpoint
//     began executing, 500s included, and replayed to every later request
//     with the key (header Idempotent-Replayed: true); the same key with
//     other parameters is a 400 idempotency_error; a request whose key is
//     still executing is a 409. A 429 (the rate limiter runs first) and a
//     parameter validation error (stripe-mock's 400) are not saved.
//   - PaymentIntents and Refunds are kept: retrieve, list (by created, newest
//     first, paginated) and search by metadata answer what was created, with
//     the metadata the request carried (stripe-mock does not echo it); a
//     cancel moves an intent Stripe allows to cancel to canceled and
//     refuses the others (payment_intent_unexpected_state).
//   - Search can be switched off, as for accounts in India
//     (docs.stripe.com/search).
//   - A charge can fail with a saved 500 api_error, having created (and
//     confirmed) its intent or not.
//   - Refunds can answer pending and settle later by event; disputes are
//     opened and moved by event. Events are signed as Stripe signs them
//     (stripe-go's webhook package) and posted to the configured endpoint.

// state is the front's memory of "Stripe". Guarded by Front.mu.
type state struct {
	keys     map[string]*savedResult
	intents  map[string]map[string]any
	refunds  map[string]map[string]any
	disputes map[string]map[string]any
	seq      int

	failCharges  []bool // the next confirmed intent creates answer a saved 500; true: the intent was created first
	refundStatus string // status of new refunds ("": stripe-mock's succeeded)
	searchOff    bool
	searchLag    time.Duration
	modify       func(form url.Values, pi map[string]any)

	webhookURL, secret string
	events             int
}

type savedResult struct {
	sig    string
	done   bool
	status int
	header http.Header
	body   []byte
}

// KeepState makes the front remember what "Stripe" answered, as described
// above. Call it before the first request.
func (f *Front) KeepState() *Front {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st == nil {
		f.st = &state{keys: map[string]*savedResult{}, intents: map[string]map[string]any{},
			refunds: map[string]map[string]any{}, disputes: map[string]map[string]any{}}
	}
	return f
}

// SendEventsTo makes the front post its events to url, signed with secret.
func (f *Front) SendEventsTo(url, secret string) {
	f.mu.Lock()
	f.st.webhookURL, f.st.secret = url, secret
	f.mu.Unlock()
}

// FailNextCharge makes the next confirmed PaymentIntent create answer
// Stripe's 500 api_error, saved for its Idempotency-Key. processed: the
// intent was created and confirmed before the failure (it is kept and can
// be found); otherwise nothing was created.
func (f *Front) FailNextCharge(processed bool) {
	f.mu.Lock()
	f.st.failCharges = append(f.st.failCharges, processed)
	f.mu.Unlock()
}

// AnswerRefunds sets the status of refunds created from now on
// ("pending", "succeeded", "": stripe-mock's).
func (f *Front) AnswerRefunds(status string) {
	f.mu.Lock()
	f.st.refundStatus = status
	f.mu.Unlock()
}

// SearchOff makes PaymentIntent search unavailable (an account in India).
func (f *Front) SearchOff(off bool) { f.mu.Lock(); f.st.searchOff = off; f.mu.Unlock() }

// SearchLag hides intents younger than d from search (Stripe's search is
// eventually consistent; lists are not).
func (f *Front) SearchLag(d time.Duration) { f.mu.Lock(); f.st.searchLag = d; f.mu.Unlock() }

// ModifyIntents lets a test edit each PaymentIntent created (its status,
// next_action) before it is kept and answered; form is what was sent.
func (f *Front) ModifyIntents(fn func(form url.Values, pi map[string]any)) {
	f.mu.Lock()
	f.st.modify = fn
	f.mu.Unlock()
}

// Intent returns a copy of a kept PaymentIntent (nil when unknown).
func (f *Front) Intent(id string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return clone(f.st.intents[id])
}

// IntentOf returns a copy of the kept PaymentIntent whose metadata
// payreq_reference is ref and that is not a closed reference's inert
// intent (nil when none).
func (f *Front) IntentOf(ref string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, pi := range f.st.intents {
		md, _ := pi["metadata"].(map[string]any)
		if md["payreq_reference"] == ref && md["payreq_closed"] == nil {
			return clone(pi)
		}
	}
	return nil
}

// IntentsOf counts the kept, non-inert PaymentIntents of reference ref
// that were confirmed (a charge).
func (f *Front) IntentsOf(ref string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, pi := range f.st.intents {
		md, _ := pi["metadata"].(map[string]any)
		if md["payreq_reference"] == ref && md["payreq_closed"] == nil {
			n++
		}
	}
	return n
}

// PutIntent keeps pi (a test's seed: it needs id, status, amount, currency
// and metadata); created defaults to now.
func (f *Front) PutIntent(pi map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi = clone(pi)
	pi["object"] = "payment_intent"
	if _, ok := pi["created"]; !ok {
		pi["created"] = time.Now().Unix()
	}
	f.st.intents[pi["id"].(string)] = pi
}

// SetIntentStatus moves a kept intent to status (no event is sent).
func (f *Front) SetIntentStatus(id, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pi := f.st.intents[id]; pi != nil {
		pi["status"] = status
		if status != "requires_action" {
			pi["next_action"] = nil
		}
	}
}

// Refund returns a copy of a kept refund (nil when unknown).
func (f *Front) Refund(id string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return clone(f.st.refunds[id])
}

// RefundsOf lists copies of the kept refunds of intent piID.
func (f *Front) RefundsOf(piID string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, r := range f.st.refunds {
		if r["payment_intent"] == piID {
			out = append(out, clone(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["id"].(string) < out[j]["id"].(string) })
	return out
}

// SettleRefund moves refund id to status ("succeeded", "failed",
// "canceled") and sends what Stripe sends: refund.updated and
// charge.refund.updated, or refund.failed and charge.refund.updated for a
// failure. It returns the webhook's answers.
func (f *Front) SettleRefund(id, status, failureReason string) ([]EventAnswer, error) {
	f.mu.Lock()
	r := f.st.refunds[id]
	if r == nil {
		f.mu.Unlock()
		return nil, fmt.Errorf("no refund %s", id)
	}
	r["status"] = status
	if failureReason != "" {
		r["failure_reason"] = failureReason
	}
	obj := clone(r)
	f.mu.Unlock()
	first := "refund.updated"
	if status == "failed" {
		first = "refund.failed"
	}
	return f.sendAll(obj, first, "charge.refund.updated")
}

// RefundOutside makes a refund of intent piID as the Stripe Dashboard does
// (no metadata of the service), succeeded, and sends refund.created and
// charge.refunded is not sent (its object is a Charge): refund.created and
// refund.updated. It returns the refund.
func (f *Front) RefundOutside(piID string, amount int64, status string) (map[string]any, []EventAnswer, error) {
	f.mu.Lock()
	pi := f.st.intents[piID]
	if pi == nil {
		f.mu.Unlock()
		return nil, nil, fmt.Errorf("no intent %s", piID)
	}
	f.st.seq++
	r := map[string]any{"id": fmt.Sprintf("re_dash%06d", f.st.seq), "object": "refund", "amount": amount,
		"currency": pi["currency"], "payment_intent": piID, "charge": "ch_" + strings.TrimPrefix(piID, "pi_"),
		"status": status, "metadata": map[string]any{}, "created": time.Now().Unix(), "reason": "requested_by_customer"}
	f.st.refunds[r["id"].(string)] = r
	obj := clone(r)
	f.mu.Unlock()
	ans, err := f.sendAll(obj, "refund.created")
	return obj, ans, err
}

// Dispute opens (or moves) dispute id of intent piID and sends typ
// (charge.dispute.created, .updated, .closed, .funds_withdrawn,
// .funds_reinstated) with the dispute as Stripe shows it: amount in minor
// units, reason, status and evidence_details.due_by.
func (f *Front) Dispute(typ, id, piID string, amount int64, reason, status string, dueBy time.Time) (EventAnswer, error) {
	f.mu.Lock()
	pi := f.st.intents[piID]
	cur := "eur"
	if pi != nil {
		cur, _ = pi["currency"].(string)
	}
	d := f.st.disputes[id]
	if d == nil {
		d = map[string]any{"id": id, "object": "dispute", "created": time.Now().Unix(), "livemode": false,
			"charge": "ch_" + strings.TrimPrefix(piID, "pi_"), "payment_intent": piID, "metadata": map[string]any{},
			"is_charge_refundable": false, "balance_transactions": []any{}}
		f.st.disputes[id] = d
	}
	d["amount"], d["currency"], d["reason"], d["status"] = amount, cur, reason, status
	d["evidence_details"] = map[string]any{"due_by": dueBy.Unix(), "has_evidence": false, "past_due": false, "submission_count": 0}
	obj := clone(d)
	f.mu.Unlock()
	ans, err := f.sendAll(obj, typ)
	if err != nil {
		return EventAnswer{}, err
	}
	return ans[0], nil
}

// EventAnswer is the webhook endpoint's answer to one event.
type EventAnswer struct {
	EventID string
	Type    string
	Status  int
	Body    []byte
}

func (f *Front) sendAll(obj map[string]any, types ...string) ([]EventAnswer, error) {
	var out []EventAnswer
	for _, typ := range types {
		body := f.Event(typ, obj)
		a, err := f.Post(body)
		if err != nil {
			return out, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Event builds a Stripe event of type typ about obj (a new event id).
func (f *Front) Event(typ string, obj map[string]any) []byte {
	f.mu.Lock()
	f.st.events++
	id := fmt.Sprintf("evt_front_%d_%d", time.Now().UnixNano(), f.st.events)
	f.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": "2025-01-27.acacia",
		"created": time.Now().Unix(), "livemode": false, "pending_webhooks": 1, "data": map[string]any{"object": obj}})
	return b
}

// Post signs body as Stripe signs an event (Stripe-Signature: t=…,v1=…
// with the endpoint secret) and posts it to the endpoint, once: a test
// sends it again to play Stripe's retry of a non-2xx answer.
func (f *Front) Post(body []byte) (EventAnswer, error) {
	f.mu.Lock()
	u, secret := f.st.webhookURL, f.st.secret
	f.mu.Unlock()
	return PostEvent(u, secret, body)
}

// PostEvent signs body with secret as Stripe signs an event and posts it
// to url, once (another endpoint than the front's: a merchant's own
// account's address).
func PostEvent(u, secret string, body []byte) (EventAnswer, error) {
	var ev struct{ ID, Type string }
	_ = json.Unmarshal(body, &ev)
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()})
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return EventAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", signed.Header)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return EventAnswer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return EventAnswer{EventID: ev.ID, Type: ev.Type, Status: resp.StatusCode, Body: b}, nil
}

// ---- serving ---------------------------------------------------------------

var (
	intentPath  = regexp.MustCompile(`^/v1/payment_intents/(pi_[A-Za-z0-9_]+)$`)
	cancelPath  = regexp.MustCompile(`^/v1/payment_intents/(pi_[A-Za-z0-9_]+)/cancel$`)
	refundPath  = regexp.MustCompile(`^/v1/refunds/(re_[A-Za-z0-9_]+)$`)
	disputePath = regexp.MustCompile(`^/v1/disputes/(dp_[A-Za-z0-9_]+)$`)
	searchQuery = regexp.MustCompile(`^metadata\['([a-z_]+)'\]:'([A-Za-z0-9_-]+)'$`)
)

// serveStateful answers a request that passed the rate limiter. upstream
// sends it to stripe-mock and returns the answer.
func (f *Front) serveStateful(w http.ResponseWriter, r *http.Request, form url.Values, upstream func() (int, http.Header, []byte)) {
	key := r.Header.Get("Idempotency-Key")
	if r.Method != http.MethodPost || key == "" {
		status, h, body := f.answer(r, form, upstream)
		write(w, status, h, body)
		return
	}
	sig := r.URL.Path + "?" + canonical(form)
	f.mu.Lock()
	s := f.st.keys[key]
	switch {
	case s != nil && !s.done:
		f.mu.Unlock()
		write(w, http.StatusConflict, nil, errorBody("idempotency_error", "idempotency_key_in_use",
			"There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): "+key+". Please try again later."))
		return
	case s != nil && s.sig != sig:
		f.mu.Unlock()
		write(w, http.StatusBadRequest, nil, errorBody("idempotency_error", "",
			"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '"+key+"' if you meant to execute a different request."))
		return
	case s != nil:
		status, h, body := s.status, s.header.Clone(), s.body
		f.mu.Unlock()
		h.Set("Idempotent-Replayed", "true")
		write(w, status, h, body)
		return
	}
	s = &savedResult{sig: sig}
	f.st.keys[key] = s
	f.mu.Unlock()
	status, h, body := f.answer(r, form, upstream)
	f.mu.Lock()
	if status == http.StatusBadRequest && !bytes.Contains(body, []byte(`"idempotency_error"`)) && !bytes.Contains(body, []byte(`"payment_intent_unexpected_state"`)) {
		// Parameters refused before the endpoint ran: nothing is saved.
		delete(f.st.keys, key)
	} else {
		s.done, s.status, s.header, s.body = true, status, h.Clone(), body
	}
	f.mu.Unlock()
	write(w, status, h, body)
}

func write(w http.ResponseWriter, status int, h http.Header, body []byte) {
	for k, v := range h {
		if strings.EqualFold(k, "Content-Length") {
			continue
		}
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func errorBody(typ, code, msg string) []byte {
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return b
}

func notFound(what, id string) (int, http.Header, []byte) {
	return http.StatusNotFound, nil, errorBody("invalid_request_error", "resource_missing", fmt.Sprintf("No such %s: '%s'", what, id))
}

func jsonAnswer(v any) (int, http.Header, []byte) {
	b, _ := json.Marshal(v)
	return http.StatusOK, http.Header{"Request-Id": {fmt.Sprintf("req_front_%d", time.Now().UnixNano())}}, b
}

// answer is what "Stripe" answers r (the idempotency layer aside).
func (f *Front) answer(r *http.Request, form url.Values, upstream func() (int, http.Header, []byte)) (int, http.Header, []byte) {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/v1/payment_intents":
		return f.createIntent(form, upstream)
	case r.Method == http.MethodGet && p == "/v1/payment_intents":
		return f.listIntents(r.URL.Query())
	case r.Method == http.MethodGet && p == "/v1/payment_intents/search":
		return f.searchIntents(r.URL.Query())
	case r.Method == http.MethodGet && intentPath.MatchString(p):
		id := intentPath.FindStringSubmatch(p)[1]
		f.mu.Lock()
		pi := clone(f.st.intents[id])
		f.mu.Unlock()
		if pi == nil {
			return notFound("payment_intent", id)
		}
		return jsonAnswer(pi)
	case r.Method == http.MethodPost && cancelPath.MatchString(p):
		return f.cancelIntent(cancelPath.FindStringSubmatch(p)[1])
	case r.Method == http.MethodPost && p == "/v1/refunds":
		return f.createRefund(form, upstream)
	case r.Method == http.MethodGet && refundPath.MatchString(p):
		id := refundPath.FindStringSubmatch(p)[1]
		f.mu.Lock()
		re := clone(f.st.refunds[id])
		f.mu.Unlock()
		if re == nil {
			return notFound("refund", id)
		}
		return jsonAnswer(re)
	case r.Method == http.MethodGet && disputePath.MatchString(p):
		id := disputePath.FindStringSubmatch(p)[1]
		f.mu.Lock()
		d := clone(f.st.disputes[id])
		f.mu.Unlock()
		if d == nil {
			return notFound("dispute", id)
		}
		return jsonAnswer(d)
	}
	return upstream()
}

func (f *Front) createIntent(form url.Values, upstream func() (int, http.Header, []byte)) (int, http.Header, []byte) {
	fail, processed := false, false
	if form.Get("confirm") == "true" {
		f.mu.Lock()
		if len(f.st.failCharges) > 0 {
			fail, processed = true, f.st.failCharges[0]
			f.st.failCharges = f.st.failCharges[1:]
		}
		f.mu.Unlock()
	}
	serverError := func() (int, http.Header, []byte) {
		// Stripe's 500: an api_error; stripe-go reads Stripe-Should-Retry.
		return http.StatusInternalServerError, http.Header{"Stripe-Should-Retry": {"false"}},
			errorBody("api_error", "", "An unknown error occurred")
	}
	if fail && !processed {
		return serverError()
	}
	status, h, body := upstream()
	if status != http.StatusOK {
		return status, h, body
	}
	var pi map[string]any
	if err := json.Unmarshal(body, &pi); err != nil {
		return http.StatusInternalServerError, nil, errorBody("api_error", "", "front: "+err.Error())
	}
	pi["metadata"] = metadataOf(form)
	pi["created"] = time.Now().Unix()
	pi["canceled_at"], pi["last_payment_error"] = nil, nil
	if form.Get("confirm") != "true" {
		pi["status"], pi["next_action"] = "requires_payment_method", nil
	}
	f.mu.Lock()
	modify := f.st.modify
	f.mu.Unlock()
	if modify != nil && form.Get("metadata[payreq_closed]") == "" {
		modify(form, pi) // may block: a test holding "Stripe's" answer
	}
	f.mu.Lock()
	f.st.intents[pi["id"].(string)] = pi
	out := clone(pi)
	f.mu.Unlock()
	if fail {
		return serverError()
	}
	return jsonAnswer(out)
}

func metadataOf(form url.Values) map[string]any {
	md := map[string]any{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") {
			md[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	return md
}

func (f *Front) cancelIntent(id string) (int, http.Header, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi := f.st.intents[id]
	if pi == nil {
		return notFound("payment_intent", id)
	}
	switch pi["status"] {
	case "requires_payment_method", "requires_capture", "requires_confirmation", "requires_action", "processing":
		pi["status"], pi["next_action"], pi["canceled_at"] = "canceled", nil, time.Now().Unix()
		pi["cancellation_reason"] = "requested_by_customer"
		return jsonAnswer(pi)
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": "payment_intent_unexpected_state",
		"message":        fmt.Sprintf("You cannot cancel this PaymentIntent because it has a status of %s.", pi["status"]),
		"payment_intent": pi}})
	return http.StatusBadRequest, nil, b
}

// listIntents answers GET /v1/payment_intents: created[gte|gt|lte|lt],
// limit, starting_after; newest first, as Stripe lists.
func (f *Front) listIntents(q url.Values) (int, http.Header, []byte) {
	bound := func(k string) (int64, bool) {
		v := q.Get(k)
		if v == "" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	limit := 10
	if n, ok := bound("limit"); ok && n > 0 && n <= 100 {
		limit = int(n)
	}
	f.mu.Lock()
	var all []map[string]any
	for _, pi := range f.st.intents {
		c := toInt(pi["created"])
		if n, ok := bound("created[gte]"); ok && c < n {
			continue
		}
		if n, ok := bound("created[gt]"); ok && c <= n {
			continue
		}
		if n, ok := bound("created[lte]"); ok && c > n {
			continue
		}
		if n, ok := bound("created[lt]"); ok && c >= n {
			continue
		}
		all = append(all, clone(pi))
	}
	f.mu.Unlock()
	sort.Slice(all, func(i, j int) bool {
		ci, cj := toInt(all[i]["created"]), toInt(all[j]["created"])
		if ci != cj {
			return ci > cj
		}
		return all[i]["id"].(string) > all[j]["id"].(string)
	})
	if after := q.Get("starting_after"); after != "" {
		i := slices.IndexFunc(all, func(pi map[string]any) bool { return pi["id"] == after })
		all = all[i+1:]
	}
	more := len(all) > limit
	if more {
		all = all[:limit]
	}
	data := make([]any, len(all))
	for i, pi := range all {
		data[i] = pi
	}
	return jsonAnswer(map[string]any{"object": "list", "url": "/v1/payment_intents", "has_more": more, "data": data})
}

func (f *Front) searchIntents(q url.Values) (int, http.Header, []byte) {
	f.mu.Lock()
	off, lag := f.st.searchOff, f.st.searchLag
	f.mu.Unlock()
	if off {
		return http.StatusBadRequest, nil, errorBody("invalid_request_error", "",
			"Search is not available for your account. See https://stripe.com/docs/search for the limitations of search.")
	}
	m := searchQuery.FindStringSubmatch(q.Get("query"))
	if m == nil {
		return http.StatusBadRequest, nil, errorBody("invalid_request_error", "", "front: unsupported search query")
	}
	f.mu.Lock()
	var data []any
	visible := time.Now().Add(-lag).Unix()
	for _, pi := range f.st.intents {
		md, _ := pi["metadata"].(map[string]any)
		if md[m[1]] == m[2] && (lag == 0 || toInt(pi["created"]) <= visible) {
			data = append(data, clone(pi))
		}
	}
	f.mu.Unlock()
	if data == nil {
		data = []any{}
	}
	return jsonAnswer(map[string]any{"object": "search_result", "url": "/v1/payment_intents/search", "has_more": false, "data": data})
}

func (f *Front) createRefund(form url.Values, upstream func() (int, http.Header, []byte)) (int, http.Header, []byte) {
	piID := form.Get("payment_intent")
	f.mu.Lock()
	pi := clone(f.st.intents[piID])
	status := f.st.refundStatus
	f.mu.Unlock()
	if pi == nil {
		return notFound("payment_intent", piID)
	}
	if pi["status"] != "succeeded" {
		return http.StatusBadRequest, nil, errorBody("invalid_request_error", "charge_not_refundable",
			fmt.Sprintf("This PaymentIntent (%s) does not have a successful charge to refund.", piID))
	}
	code, h, body := upstream()
	if code != http.StatusOK {
		return code, h, body
	}
	var re map[string]any
	if err := json.Unmarshal(body, &re); err != nil {
		return http.StatusInternalServerError, nil, errorBody("api_error", "", "front: "+err.Error())
	}
	re["metadata"], re["payment_intent"], re["currency"], re["created"] = metadataOf(form), piID, pi["currency"], time.Now().Unix()
	if a := form.Get("amount"); a != "" {
		re["amount"], _ = strconv.ParseInt(a, 10, 64)
	}
	if status != "" {
		re["status"] = status
	}
	f.mu.Lock()
	f.st.refunds[re["id"].(string)] = re
	out := clone(re)
	f.mu.Unlock()
	return jsonAnswer(out)
}

// canonical is form's encoding with sorted keys and values: the
// parameters Stripe compares under one Idempotency-Key.
func canonical(form url.Values) string {
	c := url.Values{}
	for k, v := range form {
		s := slices.Clone(v)
		sort.Strings(s)
		c[k] = s
	}
	return c.Encode()
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return 0
}

// clone deep-copies a JSON object (nil stays nil).
func clone(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}
