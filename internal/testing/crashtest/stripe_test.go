package crashtest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testing/needs"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// intentFront stands between a production stack and stripe-mock and
// records the Idempotency-Key and metadata of every PaymentIntent created;
// every request still reaches stripe-mock, which validates it against
// Stripe's OpenAPI description.
type intentFront struct {
	URL string

	mu      sync.Mutex
	intents []intentSeen
}

type intentSeen struct{ key, txID, pmType string }

func startIntentFront(t *testing.T) *intentFront {
	t.Helper()
	f := &intentFront{}
	target, _ := url.Parse(stripetest.Start(t, stripemock.Succeeded))
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents" && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			form, _ := url.ParseQuery(string(b))
			if form.Get("metadata[payreq_closed]") == "" {
				f.mu.Lock()
				f.intents = append(f.intents, intentSeen{key: r.Header.Get("Idempotency-Key"),
					txID: form.Get("metadata[payreq_transaction_id]"), pmType: form.Get("payment_method_types[0]")})
				f.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func (f *intentFront) seen() []intentSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]intentSeen(nil), f.intents...)
}

// TestCrashDuringProductionMethods: UPI, QR (Pix) and a wallet's Stripe
// PaymentMethod through the Stripe connector on the production stage,
// killed before and after the call to Stripe and after the request's
// commit; the merchant's retry with the same Idempotency-Key answers with
// the one approved payment. Every PaymentIntent Stripe was asked for carries
// its transaction's write-ahead reference as Idempotency-Key, and the
// charges of the request all carry one key: Stripe charges it once.
func TestCrashDuringProductionMethods(t *testing.T) {
	needs.External(t, "paydev with crash points on the emulators")
	front := startIntentFront(t)
	extra := []string{"-stage", "production", "-param", "LocalStripeSecretKey=sk_test_crash",
		"-param", "LocalStripeApiBase=" + front.URL, "-param", "LocalStripeWebhookSecrets=whsec_crash_test"}
	cases := []struct {
		name, pmType string
		points       []string
		pay          func(t *testing.T, p *proc, key string, id *int64) response
	}{
		{"upi", "upi", []string{crashpoint.AfterTxWrite, crashpoint.AfterCharge, crashpoint.AfterRequestCommit},
			func(t *testing.T, p *proc, key string, _ *int64) response {
				return p.call("POST", "/payments/h2h/30", key, payerBody("amount", "500", "unit", "INR", "upiId", "ann@okbank"))
			}},
		{"pix", "pix", []string{crashpoint.AfterTxWrite, crashpoint.AfterCharge},
			func(t *testing.T, p *proc, key string, id *int64) response {
				if *id == 0 {
					r := p.call("POST", "/payment-requests", "", `{"amount": 20.00, "unit": "BRL"}`)
					if r.err != nil || r.status != http.StatusCreated {
						t.Fatalf("create: %v %d %s", r.err, r.status, r.body)
					}
					*id = int64(r.json(t)["id"].(float64))
				}
				return p.call("POST", "/payments/qr/"+strconv.FormatInt(*id, 10), key, payerBody())
			}},
		{"apple-pay-pm", "card", []string{crashpoint.AfterTxWrite, crashpoint.AfterCharge},
			func(t *testing.T, p *proc, key string, _ *int64) response {
				return p.call("POST", "/payments/h2h/48", key, payerBody("amount", "31", "unit", "EUR", "token", "pm_card_visa"))
			}},
	}
	for _, c := range cases {
		for _, point := range c.points {
			t.Run(c.name+"/"+point, func(t *testing.T) {
				t.Parallel() // a stack of its own; mostly waits (start-up, the dead request's key lease)
				var id int64
				reqID, p := crashThenRetryOn(t, point, extra, func(p *proc, key string) response { return c.pay(t, p, key, &id) })
				ctx := context.Background()
				s := p.store(t)
				req, err := s.PaymentRequest(ctx, reqID)
				if err != nil {
					t.Fatal(err)
				}
				txs, err := s.TransactionsOfRequest(ctx, reqID)
				if err != nil {
					t.Fatal(err)
				}
				approved, refs := 0, map[string]string{} // transaction id → its write-ahead reference
				for _, tx := range txs {
					refs[strconv.FormatInt(tx.ID, 10)] = tx.Reference
					if tx.Status == payment.TxApproved {
						approved++
					}
				}
				if approved != 1 || req.Status != payment.RequestPaid {
					t.Fatalf("request %d: status %d with %d approved of %d transactions, want paid once", reqID, req.Status, approved, len(txs))
				}
				keys := map[string]bool{}
				for _, in := range front.seen() {
					ref, mine := refs[in.txID]
					if !mine {
						continue
					}
					if in.pmType != c.pmType {
						t.Errorf("intent of payment method type %q, want %q", in.pmType, c.pmType)
					}
					if !strings.HasSuffix(in.key, ":"+ref) || ref == "" {
						t.Errorf("intent of transaction %s with Idempotency-Key %q, want its write-ahead reference %q", in.txID, in.key, ref)
					}
					keys[in.key] = true
				}
				if len(keys) != 1 {
					t.Fatalf("the request's PaymentIntents carry %d Idempotency-Keys %v, want one (one charge)", len(keys), keys)
				}
				// The whole-table audit, without the sandbox ledger's
				// invariants (Stripe charged): one approved transaction a
				// request, notifications recorded, nothing left open.
				auditClean(t, p)
			})
		}
	}
}
