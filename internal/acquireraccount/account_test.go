package acquireraccount_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/seal"
)

// memStore keeps accounts in memory (a unit test of the service's rules;
// the DynamoDB store's writes are tested in internal/dynamo).
type memStore struct {
	accounts map[string]*acquireraccount.Account
	audit    []dashuser.AuditEntry
}

func (m *memStore) CreateConnector(_ context.Context, a *acquireraccount.Account, e dashuser.AuditEntry) error {
	if m.accounts[a.MerchantID+"/"+a.Name] != nil {
		return errkind.New(errkind.Exists, "exists", "")
	}
	m.accounts[a.MerchantID+"/"+a.Name], m.audit = a, append(m.audit, e)
	return nil
}

func (m *memStore) UpdateConnector(_ context.Context, a *acquireraccount.Account, e dashuser.AuditEntry) error {
	old := m.accounts[a.MerchantID+"/"+a.Name]
	if old == nil || old.Version != a.Version-1 {
		return errkind.New(errkind.Conflict, "conflict", "")
	}
	m.accounts[a.MerchantID+"/"+a.Name], m.audit = a, append(m.audit, e)
	return nil
}

func (m *memStore) Connector(_ context.Context, mid, name string) (*acquireraccount.Account, error) {
	if a := m.accounts[mid+"/"+name]; a != nil {
		c := *a
		return &c, nil
	}
	return nil, errkind.NotFoundErr("no account")
}

func (m *memStore) Connectors(context.Context, string) ([]*acquireraccount.Account, error) {
	return nil, nil
}

type checker struct {
	err   error
	calls int
}

func (c *checker) Check(context.Context, acquireraccount.Kind, map[string]string) error {
	c.calls++
	return c.err
}

type mode bool

func (m mode) Sandbox(context.Context, string) (bool, error) { return bool(m), nil }

func newService(t *testing.T, sandbox bool) (*acquireraccount.Service, *memStore, *checker) {
	t.Helper()
	s, err := seal.New(seal.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	st, ch := &memStore{accounts: map[string]*acquireraccount.Account{}}, &checker{}
	return &acquireraccount.Service{Store: st, Sealer: s, Checker: ch, Mode: mode(sandbox)}, st, ch
}

const sk, whsec = "sk_test_51UnitTestKey00001234", "whsec_unitTestSecret5678"

func stripe(name string) acquireraccount.Input {
	return acquireraccount.Input{MerchantID: "mer_1", Name: name, Kind: acquireraccount.Stripe,
		Values: map[string]string{acquireraccount.StripeSecretKey: sk, acquireraccount.StripeWebhookSecret: whsec}}
}

func TestValidate(t *testing.T) {
	adyen := func(mod func(map[string]string)) acquireraccount.Input {
		v := map[string]string{"apiKey": "AQEyhmfxLI3MaBFLw0m_key", "hmacKey": strings.Repeat("ab", 32), "merchantAccount": "AcmeECOM", "environment": "test"}
		mod(v)
		return acquireraccount.Input{MerchantID: "mer_1", Name: "euadyen", Kind: acquireraccount.Adyen, Values: v}
	}
	for name, c := range map[string]struct {
		in     acquireraccount.Input
		fields string // the fields refused, sorted; "" valid
	}{
		"stripe":              {stripe("eustripe"), ""},
		"adyen test":          {adyen(func(map[string]string) {}), ""},
		"adyen live":          {adyen(func(v map[string]string) { v["environment"], v["livePrefix"] = "live", "1797a841fbb37ca7-AcmeBooks" }), ""},
		"live without prefix": {adyen(func(v map[string]string) { v["environment"] = "live" }), "livePrefix"},
		"reserved name":       {stripe("stripe"), "name"},
		"bad name":            {stripe("EU Stripe"), "name"},
		"publishable key":     {acquireraccount.Input{Name: "x", Kind: acquireraccount.Stripe, Values: map[string]string{"secretKey": "pk_test_51abcdefgh", "webhookSecret": whsec}}, "secretKey"},
		"missing webhook":     {acquireraccount.Input{Name: "x", Kind: acquireraccount.Stripe, Values: map[string]string{"secretKey": sk}}, "webhookSecret"},
		"unknown field":       {adyen(func(v map[string]string) { v["password"] = "hunter2" }), "password"},
		"hmac not hex":        {adyen(func(v map[string]string) { v["hmacKey"] = "not-hex" }), "hmacKey"},
		"environment":         {adyen(func(v map[string]string) { v["environment"] = "prod" }), "environment"},
		"unknown kind":        {acquireraccount.Input{Name: "x", Kind: "worldpay"}, "kind"},
	} {
		err := c.in.Validate()
		var got []string
		if e, ok := errkind.As(err); ok {
			for _, f := range e.Fields {
				got = append(got, f.Field)
				if f.Code != "046" {
					t.Errorf("%s: field %s code %q, want 046", name, f.Field, f.Code)
				}
			}
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Join(got, ",") != c.fields {
			t.Errorf("%s: refused %v, want %q", name, got, c.fields)
		}
	}
}

func TestMask(t *testing.T) {
	for in, want := range map[string]string{
		sk: "sk_test_…1234", whsec: "whsec_…5678", "AQEyhmfxLI3MaBFLw0m_key": "…_key", "short": "…",
	} {
		if got := acquireraccount.Mask(in); got != want {
			t.Errorf("Mask(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAddSealsChecksAndAudits: the secrets are stored sealed to their
// account and field (a sealed value moved to another field or account
// does not open), the check runs before anything is written, and a
// refused check writes nothing.
func TestAddSealsChecksAndAudits(t *testing.T) {
	svc, st, ch := newService(t, true)
	ctx := context.Background()
	a, err := svc.Add(ctx, "ops@example.com", stripe("eustripe"))
	if err != nil || ch.calls != 1 || a.Version != 1 || a.Status != acquireraccount.Active {
		t.Fatalf("add: %+v %v (checks %d)", a, err, ch.calls)
	}
	if strings.Contains(a.Sealed[acquireraccount.StripeSecretKey], sk) || a.Masks[acquireraccount.StripeSecretKey] != "sk_test_…1234" {
		t.Fatalf("stored: %+v", a)
	}
	v, err := svc.Values(a)
	if err != nil || v[acquireraccount.StripeSecretKey] != sk || v[acquireraccount.StripeWebhookSecret] != whsec {
		t.Fatalf("values: %v %v", v, err)
	}
	moved := *a
	moved.Name = "other"
	if _, err := svc.Values(&moved); err == nil {
		t.Fatal("a sealed secret opened on another account")
	}
	if len(st.audit) != 1 || st.audit[0].Action != "connector.add" || strings.Contains(st.audit[0].Detail, sk) || !strings.Contains(st.audit[0].Detail, "sk_test_…1234") {
		t.Fatalf("audit: %+v", st.audit)
	}

	ch.err = errors.New("401 Invalid API Key provided")
	if _, err := svc.Add(ctx, "ops@example.com", stripe("eustripe2")); !errkind.Is(err, errkind.Invalid) {
		t.Fatalf("refused check: %v", err)
	}
	if len(st.accounts) != 1 || len(st.audit) != 1 {
		t.Fatalf("a refused check wrote: %d accounts, %d entries", len(st.accounts), len(st.audit))
	}
}

// TestModeOfCredentials: test credentials serve sandbox merchants only,
// live ones production merchants only; nothing is checked or written.
func TestModeOfCredentials(t *testing.T) {
	live := stripe("eustripe")
	live.Values[acquireraccount.StripeSecretKey] = "sk_live_51UnitTestKey00001234"
	for name, c := range map[string]struct {
		sandbox bool
		in      acquireraccount.Input
	}{"live on sandbox": {true, live}, "test on production": {false, stripe("eustripe")}} {
		svc, st, ch := newService(t, c.sandbox)
		if _, err := svc.Add(context.Background(), "payctl", c.in); !errkind.Is(err, errkind.Invalid) || ch.calls != 0 || len(st.accounts) != 0 {
			t.Errorf("%s: %v, %d checks, %d accounts", name, err, ch.calls, len(st.accounts))
		}
	}
}

// TestStatusAndReplace: disabling twice changes once; a replacement keeps
// the status and steps the version; a replacement of another kind is
// refused.
func TestStatusAndReplace(t *testing.T) {
	svc, st, _ := newService(t, true)
	ctx := context.Background()
	if _, err := svc.Add(ctx, "payctl", stripe("eustripe")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if a, err := svc.SetStatus(ctx, "payctl", "mer_1", "eustripe", acquireraccount.Disabled); err != nil || a.Version != 2 {
			t.Fatalf("disable: %+v %v", a, err)
		}
	}
	in := stripe("eustripe")
	in.Values[acquireraccount.StripeSecretKey] = "sk_test_51RotatedKey000009999"
	a, err := svc.Replace(ctx, "payctl", in)
	if err != nil || a.Version != 3 || a.Status != acquireraccount.Disabled || a.Masks[acquireraccount.StripeSecretKey] != "sk_test_…9999" {
		t.Fatalf("replace: %+v %v", a, err)
	}
	in.Kind = acquireraccount.Adyen
	if _, err := svc.Replace(ctx, "payctl", in); !errkind.Is(err, errkind.Invalid) {
		t.Fatalf("replace with another kind: %v", err)
	}
	if len(st.audit) != 3 {
		t.Fatalf("audit entries: %d, want add, disable, replace", len(st.audit))
	}
}
