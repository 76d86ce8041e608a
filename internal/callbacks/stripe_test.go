package callbacks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/stripe"
)

// fakeSettler keeps Settle's contract: the first final result of a
// transaction changes it, later ones are duplicates.
type fakeSettler struct {
	mu   sync.Mutex
	done map[int64]paycore.ProviderResult
	n    int
}

func (f *fakeSettler) Settle(_ context.Context, r paycore.ProviderResult) (paycore.Settled, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if r.TransactionID == 404 {
		return paycore.Settled{}, paycore.ErrUnknownTransaction
	}
	if _, ok := f.done[r.TransactionID]; ok {
		return paycore.Settled{Duplicate: true}, nil
	}
	f.done[r.TransactionID] = r
	return paycore.Settled{Changed: true}, nil
}

type memMarker struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (m *memMarker) MarkCallbackEvent(_ context.Context, id string, _ time.Time, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[id] {
		return errkind.New(errkind.Exists, "already exists", "")
	}
	m.seen[id] = true
	return nil
}

func stripeServer(t *testing.T) (*httptest.Server, *fakeSettler) {
	fs := &fakeSettler{done: map[int64]paycore.ProviderResult{}}
	h := New(Deps{Key: []byte("k"), Stripe: &StripeWebhook{Reader: stripe.Webhook{Secrets: []string{"whsec_old", "whsec_new"}},
		Events: &memMarker{seen: map[string]bool{}}, Settler: fs}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, fs
}

func stripeEventBody(id, typ string, txID int64, pi map[string]any) []byte {
	pi["id"], pi["object"] = "pi_"+id, "payment_intent"
	if txID != 0 {
		pi["metadata"] = map[string]string{"payreq_reference": fmt.Sprintf("ptx_%d", txID),
			"payreq_transaction_id": fmt.Sprint(txID), "payreq_payment_request_id": "77"}
	}
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": "2025-01-27.acacia",
		"data": map[string]any{"object": pi}})
	return b
}

func postStripe(t *testing.T, srv *httptest.Server, body []byte, secret string, at time.Time) (int, StripeAck) {
	t.Helper()
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	req, _ := http.NewRequest("POST", srv.URL+"/callbacks/svcwh", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(StripeSignatureHeader, sp.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a StripeAck
	_ = json.Unmarshal(b, &a)
	return resp.StatusCode, a
}

func TestStripeEventSettlesOnceAndReplaysChangeNothing(t *testing.T) {
	srv, fs := stripeServer(t)
	body := stripeEventBody("evt_1", "payment_intent.succeeded", 1001, map[string]any{"status": "succeeded", "amount": 123000, "currency": "isk"})
	code, ack := postStripe(t, srv, body, "whsec_new", time.Now())
	if code != 200 || !ack.Changed || ack.Duplicate || ack.TransactionID != 1001 {
		t.Fatalf("first delivery: %d %+v", code, ack)
	}
	// The event's own facts go to Settle, which binds them to the
	// transaction: reference and payment request from the metadata, the
	// amount converted back with Stripe's minor units (ISK in hundredths).
	r := fs.done[1001]
	if r.Status != provider.Approved || r.ProviderRef != "pi_evt_1" || r.Facts == nil || r.Facts.Reference != "ptx_1001" ||
		r.Facts.PaymentRequestID != 77 || r.Facts.Amount.String() != "1230" || r.Facts.Unit != "ISK" {
		t.Fatalf("settled with %+v facts %+v", r, r.Facts)
	}
	code, ack = postStripe(t, srv, body, "whsec_new", time.Now())
	if code != 200 || ack.Changed || !ack.Duplicate {
		t.Fatalf("replay: %d %+v, want a duplicate changing nothing", code, ack)
	}
}

func TestStripeEventDeclineCarriesTheSpecCode(t *testing.T) {
	srv, fs := stripeServer(t)
	body := stripeEventBody("evt_2", "payment_intent.payment_failed", 1002, map[string]any{"status": "requires_payment_method",
		"last_payment_error": map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds"}})
	// Signed with the previous secret: rotation keeps both valid.
	if code, ack := postStripe(t, srv, body, "whsec_old", time.Now()); code != 200 || !ack.Changed {
		t.Fatalf("%d %+v", code, ack)
	}
	if r := fs.done[1002]; r.Status != provider.Declined || r.Code != codes.InsufficientFunds {
		t.Fatalf("settled with %+v", r)
	}
}

func TestStripeEventSignatureRefusals(t *testing.T) {
	srv, fs := stripeServer(t)
	body := stripeEventBody("evt_3", "payment_intent.succeeded", 1003, map[string]any{"status": "succeeded"})
	for name, tc := range map[string]struct {
		secret string
		at     time.Time
	}{
		"forged":      {"whsec_attacker", time.Now()},
		"stale":       {"whsec_new", time.Now().Add(-10 * time.Minute)},
		"from future": {"whsec_new", time.Now().Add(10 * time.Minute)},
	} {
		if code, _ := postStripe(t, srv, body, tc.secret, tc.at); code != 401 {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	// The body altered after signing.
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_new"})
	req, _ := http.NewRequest("POST", srv.URL+"/callbacks/svcwh", strings.NewReader(strings.Replace(string(body), "1003", "1004", 1)))
	req.Header.Set(StripeSignatureHeader, sp.Header)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("tampered body: %v %v", resp.StatusCode, err)
	}
	if fs.n != 0 {
		t.Fatalf("an unverified event reached Settle %d times", fs.n)
	}
}

func TestStripeEventsThatSettleNothing(t *testing.T) {
	srv, fs := stripeServer(t)
	for _, tc := range []struct {
		body    []byte
		ignored bool
	}{
		{stripeEventBody("evt_4", "payment_intent.requires_action", 1005, map[string]any{"status": "requires_action"}), false},
		{stripeEventBody("evt_5", "charge.refunded", 0, map[string]any{}), false},
		{stripeEventBody("evt_6", "payment_intent.succeeded", 0, map[string]any{"status": "succeeded"}), true}, // not ours
		{stripeEventBody("evt_7", "payment_intent.succeeded", 404, map[string]any{"status": "succeeded"}), true},
		{stripeEventBody("evt_8", "customer.created", 0, map[string]any{}), true},
	} {
		code, ack := postStripe(t, srv, tc.body, "whsec_new", time.Now())
		if code != 200 || ack.Changed || ack.Ignored != tc.ignored {
			t.Errorf("%s: %d %+v", tc.body[:40], code, ack)
		}
	}
	if len(fs.done) != 0 {
		t.Fatalf("settled %v", fs.done)
	}
}
