package stripe

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeStripe is a recorded-fixture double of the parts of Stripe that
// stripe-mock (stateless) cannot show: idempotency keys (same key and
// parameters replay the first answer, other parameters are an
// idempotency_error), declines and 3-D Secure by Stripe's documented test
// cards (https://docs.stripe.com/testing), the search index, and the money
// it moved. Its answers are Stripe's documented response shapes.
type fakeStripe struct {
	mu        sync.Mutex
	keys      map[string]storedAnswer
	pms       map[string]string // pm id → card number
	intents   map[string]map[string]any
	order     []string
	refunds   map[string]int64 // pi → refunded minor units
	charges   map[string]int   // reference → confirmed charges that moved money
	calls     int
	n         int
	searchLag bool          // the search index has not caught up
	searchOff bool          // search is not offered (an account in India)
	fail500   int           // the next confirmed creates answer a saved 500 and create nothing
	delay     time.Duration // answer slowly (timeouts)
	params    []url.Values  // every POST body, in order
}

type storedAnswer struct {
	body   string
	status int
	resp   []byte
}

// Stripe's documented test cards and what a confirm does with them.
var testCards = map[string]struct{ code, decline string }{
	"4242424242424242": {},
	"4000000000000002": {"card_declined", "generic_decline"},
	"4000000000009995": {"card_declined", "insufficient_funds"},
	"4000000000009987": {"card_declined", "lost_card"},
	"4000000000009979": {"card_declined", "stolen_card"},
	"4000000000000069": {"expired_card", ""},
	"4000000000000127": {"incorrect_cvc", ""},
	"4000000000000119": {"processing_error", ""},
	"4100000000000019": {"card_declined", "fraudulent"},
	"4000002760003184": {"3ds", ""}, // authentication required on every transaction
}

func newFake(t *testing.T) (*fakeStripe, string) {
	f := &fakeStripe{keys: map[string]storedAnswer{}, pms: map[string]string{}, intents: map[string]map[string]any{},
		refunds: map[string]int64{}, charges: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	form, _ := url.ParseQuery(string(body))
	if r.Method == http.MethodPost {
		f.params = append(f.params, form)
	}
	key := r.Header.Get("Idempotency-Key")
	if r.Method == http.MethodPost && key != "" {
		if a, ok := f.keys[key]; ok {
			if a.body != string(body) {
				writeJSON(w, 400, map[string]any{"error": map[string]any{"type": "idempotency_error",
					"message": "Keys for idempotent requests can only be used with the same parameters they were first used with."}})
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(a.status)
			_, _ = w.Write(a.resp)
			return
		}
	}
	status, resp := f.route(r, form)
	b, _ := json.Marshal(resp)
	if r.Method == http.MethodPost && key != "" && status != 400 {
		f.keys[key] = storedAnswer{string(body), status, b}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeStripe) id(prefix string) string { f.n++; return fmt.Sprintf("%s_fake%d", prefix, f.n) }

func metadataOf(form url.Values) map[string]any {
	m := map[string]any{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok {
			m[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	return m
}

func (f *fakeStripe) route(r *http.Request, form url.Values) (int, any) {
	p := r.URL.Path
	switch {
	case r.Method == "POST" && p == "/v1/payment_methods":
		id := f.id("pm")
		f.pms[id] = form.Get("card[number]")
		return 200, map[string]any{"id": id, "object": "payment_method", "type": "card"}
	case r.Method == "POST" && p == "/v1/payment_intents":
		return f.createIntent(form)
	case r.Method == "GET" && p == "/v1/payment_intents/search":
		if f.searchOff {
			return 400, map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": "Search is not available for your account."}}
		}
		return f.search(r.URL.Query().Get("query"))
	case r.Method == "GET" && p == "/v1/payment_intents":
		// Lists are consistent (no search delay); newest first.
		data := []any{}
		for i := len(f.order) - 1; i >= 0; i-- {
			data = append(data, f.intents[f.order[i]])
		}
		return 200, map[string]any{"object": "list", "data": data, "has_more": false, "url": "/v1/payment_intents"}
	case r.Method == "GET" && strings.HasPrefix(p, "/v1/payment_intents/"):
		if pi, ok := f.intents[strings.TrimPrefix(p, "/v1/payment_intents/")]; ok {
			return 200, pi
		}
		return 404, map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": "resource_missing"}}
	case r.Method == "POST" && strings.HasSuffix(p, "/cancel"):
		pi, ok := f.intents[strings.TrimSuffix(strings.TrimPrefix(p, "/v1/payment_intents/"), "/cancel")]
		if !ok || pi["status"] == "succeeded" {
			return 400, map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": "payment_intent_unexpected_state"}}
		}
		pi["status"], pi["next_action"] = "canceled", nil
		return 200, pi
	case r.Method == "POST" && p == "/v1/refunds":
		piID := form.Get("payment_intent")
		pi, ok := f.intents[piID]
		if !ok || pi["status"] != "succeeded" {
			return 400, map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": "charge_not_refundable"}}
		}
		var amt int64
		fmt.Sscan(form.Get("amount"), &amt)
		f.refunds[piID] += amt
		return 200, map[string]any{"id": f.id("re"), "object": "refund", "status": "succeeded", "amount": amt,
			"payment_intent": piID, "metadata": metadataOf(form)}
	}
	return 404, map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": "unknown path " + p}}
}

func (f *fakeStripe) createIntent(form url.Values) (int, any) {
	if form.Get("confirm") == "true" && f.fail500 > 0 {
		f.fail500--
		return 500, map[string]any{"error": map[string]any{"type": "api_error", "message": "An unknown error occurred"}}
	}
	var amount int64
	fmt.Sscan(form.Get("amount"), &amount)
	pi := map[string]any{"id": f.id("pi"), "object": "payment_intent", "amount": amount, "currency": form.Get("currency"),
		"status": "requires_payment_method", "metadata": metadataOf(form), "created": time.Now().Unix()}
	f.intents[pi["id"].(string)] = pi
	f.order = append(f.order, pi["id"].(string))
	if form.Get("confirm") != "true" {
		return 200, pi
	}
	ref, _ := pi["metadata"].(map[string]any)[MetaReference].(string)
	tc := testCards[f.pms[form.Get("payment_method")]]
	switch tc.code {
	case "":
		pi["status"] = "succeeded"
		f.charges[ref]++
		return 200, pi
	case "3ds":
		if form.Get("error_on_requires_action") == "true" {
			tc.code, tc.decline = "authentication_required", "authentication_required"
			break
		}
		pi["status"] = "requires_action"
		pi["next_action"] = map[string]any{"type": "redirect_to_url", "redirect_to_url": map[string]any{
			"url": "https://hooks.stripe.com/3d_secure_2/hosted?payment_intent=" + pi["id"].(string), "return_url": form.Get("return_url")}}
		return 200, pi
	}
	pi["last_payment_error"] = map[string]any{"type": "card_error", "code": tc.code, "decline_code": tc.decline}
	return 402, map[string]any{"error": map[string]any{"type": "card_error", "code": tc.code, "decline_code": tc.decline,
		"message": "Your card was declined.", "payment_intent": pi}}
}

// finishChallenge is the payer answering the issuer's challenge.
func (f *fakeStripe) finishChallenge(piID string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pi := f.intents[piID]
	pi["next_action"] = nil
	if ok {
		pi["status"] = "succeeded"
		f.charges[pi["metadata"].(map[string]any)[MetaReference].(string)]++
		return
	}
	pi["status"] = "requires_payment_method"
	pi["last_payment_error"] = map[string]any{"type": "invalid_request_error", "code": "payment_intent_authentication_failure"}
}

func (f *fakeStripe) search(q string) (int, any) {
	data := []any{}
	if !f.searchLag {
		for _, id := range f.order {
			pi := f.intents[id]
			ref, _ := pi["metadata"].(map[string]any)[MetaReference].(string)
			if q == fmt.Sprintf("metadata['%s']:'%s'", MetaReference, ref) {
				data = append(data, pi)
			}
		}
	}
	return 200, map[string]any{"object": "search_result", "data": data, "has_more": false, "url": "/v1/payment_intents/search"}
}

func (f *fakeStripe) moneyCharged(ref string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.charges[ref]
}
