// Package merchant is the merchant account: settings, limits and API keys.
//
// Not to be confused with internal/merchantapi, the HTTP API merchants call for payment requests.
package merchant

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/routing"
)

// Merchant is a merchant account.
type Merchant struct {
	ID      string
	Name    string
	Sandbox bool

	NotifyURL      string
	SuccessURL     string
	FailureURL     string
	AllowedOrigins []string
	Methods        []int // enabled host-to-host method selectors
	Limits         Limits
	// RateLimitPerMinute is the API request budget; 0 means DefaultRateLimit.
	RateLimitPerMinute int
	// NotificationFormat is "form" (spec default) or "json" (spec's test variant).
	NotificationFormat string
	// Routing picks the connector of each attempt (internal/routing);
	// empty: the stage's default connector.
	Routing routing.Rules

	APIKeyHash   string // SHA-256 of the key: the lookup handle, never the key
	APIKeyPrefix string // first characters, shown to operators to recognise a key
	SealedAPIKey string // the key itself, sealed: it signs notifications
	SealedSecret string // webhook secret (Standard Webhooks, JSON variant), sealed

	// The key rotated out, while it keeps working (see RotateAPIKey):
	// its hash, its prefix, and when it stops.
	PrevAPIKeyHash   string
	PrevAPIKeyPrefix string
	PrevAPIKeyUntil  time.Time
	// The webhook secret rotated out, sealed: notifications are signed
	// with it too until PrevSecretUntil (see RotateWebhookSecret).
	SealedPrevSecret string
	PrevSecretUntil  time.Time

	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// Limits are the per-merchant payment limits of the spec (codes 018–024, 020, 047).
// Amounts are compared in the payment's own currency. Zero or nil means no limit.
type Limits struct {
	MinAmount     *decimal.Decimal `json:"minAmount,omitempty"`
	MaxAmount     *decimal.Decimal `json:"maxAmount,omitempty"`
	Currencies    []string         `json:"currencies,omitempty"`
	Countries     []string         `json:"countries,omitempty"`
	DailyCount    int64            `json:"dailyCount,omitempty"`
	MonthlyCount  int64            `json:"monthlyCount,omitempty"`
	DailyAmount   *decimal.Decimal `json:"dailyAmount,omitempty"`
	MonthlyAmount *decimal.Decimal `json:"monthlyAmount,omitempty"`
}

// DefaultRateLimit is the spec's 100 requests per minute.
const DefaultRateLimit = 100

// RateLimit returns the effective per-minute budget.
func (m *Merchant) RateLimit() int {
	if m.RateLimitPerMinute > 0 {
		return m.RateLimitPerMinute
	}
	return DefaultRateLimit
}

// Selectors of the spec's host-to-host methods; 1 exists in the sandbox only.
var (
	WalletBSelectors     = []int{48, 49, 50, 51, 56, 57, 58, 59}
	WalletASelectors     = []int{44, 45, 46, 47, 52, 53, 54, 55}
	UPISelectors         = []int{30, 31}
	AlternativeSelectors = []int{27, 43}
	SandboxSelector      = 1
)

// KnownSelector reports whether n is a selector of the spec.
func KnownSelector(n int) bool {
	return n == SandboxSelector || slices.Contains(WalletBSelectors, n) || slices.Contains(WalletASelectors, n) ||
		slices.Contains(UPISelectors, n) || slices.Contains(AlternativeSelectors, n)
}

// AllSelectors lists every selector, sandbox one first.
func AllSelectors() []int {
	out := []int{SandboxSelector}
	for _, g := range [][]int{AlternativeSelectors, UPISelectors, WalletASelectors, WalletBSelectors} {
		out = append(out, g...)
	}
	slices.Sort(out)
	return out
}

// Validate checks the settings an operator can change.
func (m *Merchant) Validate() error {
	var problems []string
	if strings.TrimSpace(m.Name) == "" || len(m.Name) > 100 {
		problems = append(problems, "name is required (at most 100 characters)")
	}
	for _, u := range []struct{ name, val string }{{"notify URL", m.NotifyURL}, {"success URL", m.SuccessURL}, {"failure URL", m.FailureURL}} {
		if u.val != "" && !payment.ValidURL(u.val, m.Sandbox) {
			problems = append(problems, u.name+" must be an absolute https URL (http allowed in the sandbox)")
		}
	}
	for _, o := range m.AllowedOrigins {
		if _, err := NormalizeOrigin(o, m.Sandbox); err != nil {
			problems = append(problems, "allowedOrigins: "+err.Error())
		}
	}
	for _, n := range m.Methods {
		if !KnownSelector(n) || (n == SandboxSelector && !m.Sandbox) {
			problems = append(problems, fmt.Sprintf("method selector %d is not available", n))
		}
	}
	for _, c := range m.Limits.Currencies {
		if _, ok := currency.Lookup(c); !ok {
			problems = append(problems, "unknown currency "+c)
		}
	}
	for _, c := range m.Limits.Countries {
		if len(c) != 2 || strings.ToUpper(c) != c {
			problems = append(problems, "country "+c+" must be an upper-case ISO 3166-1 alpha-2 code")
		}
	}
	l := m.Limits
	for _, d := range []*decimal.Decimal{l.MinAmount, l.MaxAmount, l.DailyAmount, l.MonthlyAmount} {
		if d != nil && d.IsNegative() {
			problems = append(problems, "limit amounts must not be negative")
			break
		}
	}
	if l.MinAmount != nil && l.MaxAmount != nil && l.MaxAmount.IsPositive() && l.MinAmount.GreaterThan(*l.MaxAmount) {
		problems = append(problems, "minimum amount exceeds maximum amount")
	}
	if l.DailyCount < 0 || l.MonthlyCount < 0 || m.RateLimitPerMinute < 0 {
		problems = append(problems, "counts must not be negative")
	}
	if m.NotificationFormat != "" && m.NotificationFormat != "form" && m.NotificationFormat != "json" {
		problems = append(problems, `notification format must be "form" or "json"`)
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid merchant: %s", strings.Join(problems, "; "))
	}
	return nil
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randomString(n int) string {
	b := make([]byte, n)
	max := big.NewInt(int64(len(base62)))
	for i := range b {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(err) // crypto/rand failing means the platform cannot issue secrets at all
		}
		b[i] = base62[v.Int64()]
	}
	return string(b)
}

// NewID returns a merchant id such as "mer_3kTMd9cPqLx2".
func NewID() string { return "mer_" + randomString(14) }

// NewAPIKey returns a fresh key: "prk_test_" (sandbox) or "prk_live_" then
// 40 base62 characters (about 238 bits).
func NewAPIKey(sandbox bool) string {
	if sandbox {
		return "prk_test_" + randomString(40)
	}
	return "prk_live_" + randomString(40)
}

// HashAPIKey is the stored lookup handle of a key. A fast hash is right here:
// keys are long random strings, so there is nothing to brute-force.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte("payreq/api-key/v1:" + key))
	return hex.EncodeToString(sum[:])
}

// KeyMatches compares a presented key with a stored hash in constant time.
func KeyMatches(presented, storedHash string) bool {
	h := HashAPIKey(presented)
	return subtle.ConstantTimeCompare([]byte(h), []byte(storedHash)) == 1
}

// KeyPrefix is the part of a key safe to display ("prk_test_AbCd").
func KeyPrefix(key string) string {
	if len(key) > 13 {
		return key[:13]
	}
	return key
}
