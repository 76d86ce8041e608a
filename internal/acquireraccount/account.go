// Package acquireraccount keeps a merchant's own acquirer accounts: its Stripe
// account (its secret key and webhook signing secret) or its Adyen account
// (API key, HMAC key, merchant account, live URL prefix). Without one, a
// merchant charges through the platform's connectors.
//
// The rules it keeps:
//   - A secret is sealed before it is stored, bound to its merchant, account
//     name and field, so a sealed value copied onto another account does not
//     open. What a person sees afterwards is its mask (a prefix and the last
//     four characters), never the secret.
//   - An account is saved only after a harmless call with its credentials
//     succeeded (Stripe: read the balance; Adyen: list payment methods). A
//     refused check writes nothing.
//   - Every change (add, replace, disable, enable) is written together with
//     its audit entry in one transaction: no change without its entry.
//   - Every write is conditional: adding takes a free name; a change names
//     the version it read, so of two concurrent changes one wins and the
//     other is refused with errkind.Conflict.
//   - A test-mode credential never serves a production merchant and a live
//     one never serves a sandbox merchant.
package acquireraccount

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
)

// Kind is the acquirer an account belongs to.
type Kind string

const (
	Stripe Kind = "stripe"
	Adyen  Kind = "adyen"
)

// Status says whether an account may be routed to.
type Status string

const (
	Active   Status = "active"
	Disabled Status = "disabled"
)

// Field names of the kinds' credentials and settings.
const (
	StripeSecretKey     = "secretKey"
	StripeWebhookSecret = "webhookSecret"

	AdyenAPIKey          = "apiKey"
	AdyenHMACKey         = "hmacKey"
	AdyenMerchantAccount = "merchantAccount"
	AdyenLivePrefix      = "livePrefix"
	AdyenEnvironment     = "environment" // "test" or "live"
)

type field struct {
	name     string
	secret   bool
	required bool
	valid    func(string) error
}

var (
	stripeSecretKey = regexp.MustCompile(`^(sk|rk)_(test|live)_[A-Za-z0-9]{8,247}$`)
	stripeWhsec     = regexp.MustCompile(`^whsec_[A-Za-z0-9+/=_-]{8,200}$`)
	hexKey          = regexp.MustCompile(`^([0-9A-Fa-f]{2}){16,64}$`)
	adyenAccount    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,80}$`)
	adyenPrefix     = regexp.MustCompile(`^[a-z0-9]{8,40}-[A-Za-z0-9]{4,40}$`)
	printable       = regexp.MustCompile(`^[\x21-\x7e]{16,512}$`)
)

func matching(re *regexp.Regexp, what string) func(string) error {
	return func(v string) error {
		if !re.MatchString(v) {
			return fmt.Errorf("is not %s", what)
		}
		return nil
	}
}

// fields lists what each kind stores: its secrets (sealed) and settings.
var fields = map[Kind][]field{
	Stripe: {
		{StripeSecretKey, true, true, matching(stripeSecretKey, "a Stripe secret or restricted key (sk_test_…, sk_live_…, rk_…)")},
		{StripeWebhookSecret, true, true, matching(stripeWhsec, "a Stripe webhook signing secret (whsec_…)")},
	},
	Adyen: {
		{AdyenAPIKey, true, true, matching(printable, "an Adyen API key (16 to 512 printable characters)")},
		{AdyenHMACKey, true, true, matching(hexKey, "an Adyen HMAC key (hexadecimal, 32 to 128 digits)")},
		{AdyenMerchantAccount, false, true, matching(adyenAccount, "an Adyen merchant account name")},
		{AdyenEnvironment, false, true, func(v string) error {
			if v != "test" && v != "live" {
				return fmt.Errorf("must be test or live")
			}
			return nil
		}},
		{AdyenLivePrefix, false, false, matching(adyenPrefix, "an Adyen live URL prefix ([random]-[company name])")},
	},
}

// FieldInfo describes one field of a kind, for forms.
type FieldInfo struct {
	Name     string
	Secret   bool // sealed when stored; only its mask is shown afterwards
	Required bool
}

// Fields lists kind's fields in the order a form asks for them; none for
// an unknown kind.
func Fields(kind Kind) []FieldInfo {
	var out []FieldInfo
	for _, f := range fields[kind] {
		out = append(out, FieldInfo{Name: f.name, Secret: f.secret, Required: f.required})
	}
	return out
}

// Reserved are the platform's connector names: a merchant's own account
// cannot take one, so a routing rule naming it is never ambiguous.
var Reserved = []string{connector.Sandbox, connector.Stripe, connector.Adyen, "platform", "default"}

// Account is one of a merchant's own acquirer accounts. Sealed holds each
// secret sealed (see Owner); Masks what may be shown of it.
type Account struct {
	MerchantID string
	Name       string
	Kind       Kind
	Status     Status
	Settings   map[string]string // the kind's non-secret fields
	Sealed     map[string]string // the kind's secrets, sealed
	Masks      map[string]string // per secret: its prefix and last four characters
	Live       bool              // live credentials (sk_live_, Adyen live)
	CheckedAt  time.Time         // the last successful harmless call
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Version    int64 // 1 on creation, +1 per change
}

// WebhookPath is where, under the API's base URL, the acquirer must send
// account a's events (the merchant registers it as a webhook endpoint in
// its own account; callbacks.StripeAccountPath): "" for a kind whose
// events the service does not receive yet (Adyen).
func WebhookPath(a *Account) string {
	if a.Kind != Stripe {
		return ""
	}
	return "/callbacks/svcwh/" + a.MerchantID + "/" + a.Name
}

// Owner is what a secret of field is sealed to.
func Owner(merchantID, name, field string) string {
	return "connector/" + merchantID + "/" + name + "/" + field
}

// Input is what a person gives to add or replace an account: every field of
// its kind, secrets in plain text (they live only in memory).
type Input struct {
	MerchantID string
	Name       string
	Kind       Kind
	Values     map[string]string
}

// Mask shows a secret as its recognisable prefix and last four characters.
func Mask(secret string) string {
	prefix := ""
	for _, p := range []string{"sk_test_", "sk_live_", "rk_test_", "rk_live_", "whsec_"} {
		if strings.HasPrefix(secret, p) {
			prefix = p
			break
		}
	}
	if len(secret) <= len(prefix)+8 {
		return prefix + "…"
	}
	return prefix + "…" + secret[len(secret)-4:]
}

// Validate checks in against its kind: the name, every required field, no
// unknown field. It returns an errkind.Invalid with one FieldError per
// problem.
func (in Input) Validate() error {
	var errs []errkind.FieldError
	add := func(f, detail string) {
		errs = append(errs, errkind.FieldError{Field: f, Code: codes.InvalidPaymentProvider, Detail: detail})
	}
	if !connector.ValidName(in.Name) {
		add("name", "must be 1 to 20 lower-case letters or digits, starting with a letter (a connector's name)")
	} else if slices.Contains(Reserved, in.Name) {
		add("name", fmt.Sprintf("%q is a platform connector's name", in.Name))
	}
	fs, ok := fields[in.Kind]
	if !ok {
		add("kind", "must be stripe or adyen")
		return errkind.Validation(errs)
	}
	known := map[string]bool{}
	for _, f := range fs {
		known[f.name] = true
		v := in.Values[f.name]
		switch {
		case v == "" && f.required:
			add(f.name, "is required")
		case v != "":
			if err := f.valid(v); err != nil {
				add(f.name, err.Error())
			}
		}
	}
	for k := range in.Values {
		if !known[k] {
			add(k, fmt.Sprintf("is not a field of a %s account", in.Kind))
		}
	}
	if in.Kind == Adyen && in.Values[AdyenEnvironment] == "live" && in.Values[AdyenLivePrefix] == "" {
		add(AdyenLivePrefix, "is required for a live Adyen account")
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b errkind.FieldError) int { return strings.Compare(a.Field, b.Field) })
		return errkind.Validation(errs)
	}
	return nil
}

// live reports whether in's credentials move real money.
func (in Input) live() bool {
	switch in.Kind {
	case Stripe:
		return strings.Contains(in.Values[StripeSecretKey], "_live_")
	case Adyen:
		return in.Values[AdyenEnvironment] == "live"
	}
	return false
}

// Sealer seals and opens secrets bound to an owner (internal/seal).
type Sealer interface {
	Seal(secret, owner string) string
	Open(sealed, owner string) (string, error)
}

// Checker makes a harmless call with an account's credentials: it returns
// nil when the acquirer accepted them, an error saying why not otherwise.
// It moves no money.
type Checker interface {
	Check(ctx context.Context, kind Kind, values map[string]string) error
}

// Store keeps accounts. Every write is conditional and carries its audit
// entry in the same transaction.
type Store interface {
	// CreateConnector writes a new account; errkind.Exists when the
	// merchant already has one of that name.
	CreateConnector(ctx context.Context, a *Account, audit dashuser.AuditEntry) error
	// UpdateConnector replaces the account whose version is a.Version-1;
	// errkind.Conflict when it changed meanwhile, NotFound when absent.
	UpdateConnector(ctx context.Context, a *Account, audit dashuser.AuditEntry) error
	// Connector reads one account; errkind.NotFound when absent.
	Connector(ctx context.Context, merchantID, name string) (*Account, error)
	// Connectors lists a merchant's accounts by name.
	Connectors(ctx context.Context, merchantID string) ([]*Account, error)
}

// MerchantMode says whether a merchant charges real money.
type MerchantMode interface {
	Sandbox(ctx context.Context, merchantID string) (bool, error)
}

// Service adds, checks and changes accounts.
type Service struct {
	Store   Store
	Sealer  Sealer
	Checker Checker
	Mode    MerchantMode
	Now     func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Add validates in, checks its credentials with a harmless call, and saves
// the account (active) with its audit entry. actor is who asked.
func (s *Service) Add(ctx context.Context, actor string, in Input) (*Account, error) {
	a, err := s.prepare(ctx, in)
	if err != nil {
		return nil, err
	}
	a.Version, a.CreatedAt = 1, a.UpdatedAt
	if err := s.Store.CreateConnector(ctx, a, s.entry(a, actor, "connector.add", "added "+describe(a))); err != nil {
		return nil, err
	}
	return a, nil
}

// Replace gives an existing account new credentials (a rotated key): the
// same checks as Add; the account keeps its name, kind and status.
func (s *Service) Replace(ctx context.Context, actor string, in Input) (*Account, error) {
	old, err := s.Store.Connector(ctx, in.MerchantID, in.Name)
	if err != nil {
		return nil, err
	}
	if old.Kind != in.Kind {
		return nil, errkind.Field("kind", codes.InvalidPaymentProvider, fmt.Sprintf("the account %q is a %s account", in.Name, old.Kind))
	}
	a, err := s.prepare(ctx, in)
	if err != nil {
		return nil, err
	}
	a.Status, a.CreatedAt, a.Version = old.Status, old.CreatedAt, old.Version+1
	if err := s.Store.UpdateConnector(ctx, a, s.entry(a, actor, "connector.replace", "replaced the credentials of "+describe(a))); err != nil {
		return nil, err
	}
	return a, nil
}

// SetStatus disables or enables an account. Setting the status it has is
// not a change: it returns the account as it is and writes nothing.
func (s *Service) SetStatus(ctx context.Context, actor, merchantID, name string, st Status) (*Account, error) {
	if st != Active && st != Disabled {
		return nil, errkind.Field("status", codes.InvalidPaymentProvider, "must be active or disabled")
	}
	a, err := s.Store.Connector(ctx, merchantID, name)
	if err != nil {
		return nil, err
	}
	if a.Status == st {
		return a, nil
	}
	next := *a
	next.Status, next.UpdatedAt, next.Version = st, s.now(), a.Version+1
	action := "connector.enable"
	if st == Disabled {
		action = "connector.disable"
	}
	if err := s.Store.UpdateConnector(ctx, &next, s.entry(&next, actor, action, string(st)+" "+describe(&next))); err != nil {
		return nil, err
	}
	return &next, nil
}

// Test checks a stored account's credentials again and records when they
// last passed. A failed check changes nothing and returns why.
func (s *Service) Test(ctx context.Context, actor, merchantID, name string) (*Account, error) {
	a, err := s.Store.Connector(ctx, merchantID, name)
	if err != nil {
		return nil, err
	}
	values, err := s.Values(a)
	if err != nil {
		return nil, err
	}
	if err := s.Checker.Check(ctx, a.Kind, values); err != nil {
		return nil, refused(err, fmt.Sprintf("the %s account %q refused the check: %v", a.Kind, a.Name, err))
	}
	next := *a
	next.CheckedAt, next.UpdatedAt, next.Version = s.now(), s.now(), a.Version+1
	if err := s.Store.UpdateConnector(ctx, &next, s.entry(&next, actor, "connector.test", "checked "+describe(&next))); err != nil {
		return nil, err
	}
	return &next, nil
}

// List returns a merchant's accounts by name (settings and masks; their
// secrets stay sealed).
func (s *Service) List(ctx context.Context, merchantID string) ([]*Account, error) {
	list, err := s.Store.Connectors(ctx, merchantID)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list, func(a, b *Account) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

// refused is the error of a failed harmless call: Invalid with the spec's
// code for a payment provider that cannot be used.
func refused(cause error, detail string) error {
	e := errkind.Wrap(errkind.Invalid, cause, detail)
	e.Code = codes.InvalidPaymentProvider
	return e
}

// Values opens an account's secrets and returns every field in plain text,
// for building its connector. The map lives in memory only.
func (s *Service) Values(a *Account) (map[string]string, error) {
	out := make(map[string]string, len(a.Settings)+len(a.Sealed))
	for k, v := range a.Settings {
		out[k] = v
	}
	for k, sealed := range a.Sealed {
		v, err := s.Sealer.Open(sealed, Owner(a.MerchantID, a.Name, k))
		if err != nil {
			return nil, fmt.Errorf("open %s of connector %s: %w", k, a.Name, err)
		}
		out[k] = v
	}
	return out, nil
}

// prepare validates, checks and seals in.
func (s *Service) prepare(ctx context.Context, in Input) (*Account, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	sandbox, err := s.Mode.Sandbox(ctx, in.MerchantID)
	if err != nil {
		return nil, err
	}
	if live := in.live(); live && sandbox {
		return nil, errkind.Field("kind", codes.InvalidPaymentProvider, "live credentials cannot serve a sandbox merchant")
	} else if !live && !sandbox {
		return nil, errkind.Field("kind", codes.InvalidPaymentProvider, "test credentials cannot serve a production merchant")
	}
	if err := s.Checker.Check(ctx, in.Kind, in.Values); err != nil {
		return nil, refused(err, fmt.Sprintf("the %s account refused the check: %v", in.Kind, err))
	}
	now := s.now()
	a := &Account{MerchantID: in.MerchantID, Name: in.Name, Kind: in.Kind, Status: Active, Live: in.live(),
		Settings: map[string]string{}, Sealed: map[string]string{}, Masks: map[string]string{},
		CheckedAt: now, UpdatedAt: now}
	for _, f := range fields[in.Kind] {
		v := in.Values[f.name]
		switch {
		case v == "":
		case f.secret:
			a.Sealed[f.name] = s.Sealer.Seal(v, Owner(in.MerchantID, in.Name, f.name))
			a.Masks[f.name] = Mask(v)
		default:
			a.Settings[f.name] = v
		}
	}
	return a, nil
}

func (s *Service) entry(a *Account, actor, action, detail string) dashuser.AuditEntry {
	return dashuser.AuditEntry{MerchantID: a.MerchantID, At: a.UpdatedAt, Actor: actor, Action: action, Detail: detail}
}

// describe names an account for an audit entry: name, kind and masks, never
// a secret.
func describe(a *Account) string {
	var masks []string
	for _, k := range slices.Sorted(maps.Keys(a.Masks)) {
		masks = append(masks, k+"="+a.Masks[k])
	}
	return fmt.Sprintf("%s account %q (%s)", a.Kind, a.Name, strings.Join(masks, ", "))
}
