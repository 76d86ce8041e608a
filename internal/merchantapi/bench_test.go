package merchantapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/checkouttoken"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/payment"
)

// memStore measures the handler's own CPU cost: no I/O.
type memStore struct {
	mu sync.Mutex
	m  map[int64]*payment.Request
	k  *merchant.Merchant
}

func (s *memStore) CreatePaymentRequest(_ context.Context, r *payment.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[r.ID]; ok {
		return errkind.New(errkind.Exists, "already exists", "")
	}
	s.m[r.ID] = r
	return nil
}
func (s *memStore) PaymentRequest(_ context.Context, id int64) (*payment.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[id]; ok {
		return r, nil
	}
	return nil, errkind.NotFoundErr("not found")
}
func (s *memStore) CancelPaymentRequest(context.Context, int64, string, time.Time) (*payment.Request, error) {
	return nil, errkind.NotFoundErr("not found")
}
func (s *memStore) MerchantByAPIKeyHash(context.Context, string) (*merchant.Merchant, error) {
	return s.k, nil
}

func BenchmarkCreateHandler(b *testing.B) {
	key := merchant.NewAPIKey(true)
	store := &memStore{m: map[int64]*payment.Request{}, k: &merchant.Merchant{ID: "mer_bench", Name: "Bench", Sandbox: true, APIKeyHash: merchant.HashAPIKey(key)}}
	tokens, _ := checkouttoken.New(strings.Repeat("k", 40))
	h := merchantapi.New(merchantapi.Deps{Store: store, Tokens: tokens,
		Auth: apikey.New(store), Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	body := `{"amount":49.90,"unit":"EUR","referenceId":"order-1042","client":{"email":"ann@example.com","phone":"4915112345678"},"notifyUrl":"https://shop.example/n"}`
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest("POST", "/payment-requests", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
