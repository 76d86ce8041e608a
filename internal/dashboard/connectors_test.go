package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/needs"
)

// The dashboard's account checks go to these fronts (the stack's
// LocalAccount*ApiBase parameters, set in TestMain): stripe-mock and Prism
// serving Adyen's description before adyenmock's front, started by the
// first test that needs them and stopped after the package's tests.
var (
	stripeAccounts = newLazyFront()
	adyenAccounts  = newLazyFront()
)

const (
	accountStripeKey   = "sk_test_51PayreqDashboardAbcd4321"
	accountStripeWhsec = "whsec_payreqDashboardSecret8765"
	accountAdyenKey    = "AQEyhmfxLI3MaBFLw0m_dashboard_test_key"
	accountAdyenHMAC   = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	accountAdyenMerch  = "AcmeBooksECOM"
)

// lazyFront forwards to a target set later; 502 until then.
type lazyFront struct {
	srv    *httptest.Server
	target atomic.Pointer[url.URL]
	once   sync.Once
	err    error
}

func newLazyFront() *lazyFront {
	f := &lazyFront{}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(f.target.Load())
		r.Out.Host = r.In.Host
	}}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.target.Load() == nil {
			http.Error(w, "no test double started", http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	return f
}

// accountDoubles starts stripe-mock and Prism (once per test binary) behind
// the fronts the stack's dashboard checks accounts against.
func accountDoubles(t *testing.T) {
	t.Helper()
	needs.External(t, "stripe-mock", "Prism (npm ci in infra/local)")
	testenv.Stack(t)
	stripeAccounts.once.Do(func() {
		dir, err := os.MkdirTemp("", "dash-stripe-")
		if err != nil {
			stripeAccounts.err = err
			return
		}
		base, stop, err := stripemock.Run(context.Background(), dir, "")
		if err != nil {
			stripeAccounts.err = err
			return
		}
		testenv.AfterAll(func() { stop(); os.RemoveAll(dir) })
		u, _ := url.Parse(base)
		stripeAccounts.target.Store(u)
	})
	adyenAccounts.once.Do(func() {
		infra, err := devstack.InfraDir()
		if err == nil {
			err = devstack.EnsureNodeModules(infra, io.Discard)
		}
		if err != nil {
			adyenAccounts.err = err
			return
		}
		dir, err := os.MkdirTemp("", "dash-adyen-")
		if err != nil {
			adyenAccounts.err = err
			return
		}
		m, err := adyenmock.Run(context.Background(), infra, dir, accountAdyenKey, accountAdyenHMAC)
		if err != nil {
			adyenAccounts.err = err
			return
		}
		m.Front.SetMerchantAccount(accountAdyenMerch)
		testenv.AfterAll(func() { m.Stop(); os.RemoveAll(dir) })
		u, _ := url.Parse(m.URL)
		adyenAccounts.target.Store(u)
	})
	for _, f := range []*lazyFront{stripeAccounts, adyenAccounts} {
		if f.err != nil {
			t.Fatal(f.err)
		}
	}
}

func stripeForm(csrf, name, key string) url.Values {
	return url.Values{"csrf": {csrf}, "kind": {"stripe"}, "name": {name}, "secretKey": {key}, "webhookSecret": {accountStripeWhsec}}
}

// accounts reads the merchant's stored accounts.
func accounts(t *testing.T, merchantID string) []*acquireraccount.Account {
	t.Helper()
	list, err := testenv.PatientStore(t, testenv.Stack(t)).Connectors(context.Background(), merchantID)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// auditActions lists the merchant's audit entries' actions (newest first)
// and fails when any holds one of secrets.
func auditActions(t *testing.T, merchantID string, secrets ...string) []string {
	t.Helper()
	es, err := testenv.PatientStore(t, testenv.Stack(t)).AuditEntries(context.Background(), merchantID, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Action)
		for _, s := range secrets {
			if strings.Contains(e.Detail, s) {
				t.Errorf("audit entry %s holds a secret: %s", e.Action, e.Detail)
			}
		}
	}
	return out
}

// noSecret fails when the page holds one of secrets.
func noSecret(t *testing.T, what string, p page, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(p.body, s) || strings.Contains(html(p.body), s) {
			t.Errorf("%s: the page holds a secret (%.12s…)", what, s)
		}
	}
}

// row is the text of the accounts table's cell of class in the row of name.
func row(t *testing.T, p page, name, class string) string {
	t.Helper()
	i := strings.Index(p.body, `<tr data-name="`+name+`">`)
	if i < 0 {
		t.Fatalf("no row %s in the accounts table:\n%s", name, p.body)
	}
	r := p.body[i:]
	r = r[:strings.Index(r, "</tr>")]
	got := cells(r, class)
	if len(got) != 1 {
		t.Fatalf("row %s: %d cells of class %s", name, len(got), class)
	}
	return got[0]
}

// seedAccount stores a Stripe account of merchantID as the service leaves
// one (masks; sealed values the page never opens), with its audit entry.
func seedAccount(t *testing.T, merchantID, name string) {
	t.Helper()
	now := time.Now().UTC()
	a := &acquireraccount.Account{MerchantID: merchantID, Name: name, Kind: acquireraccount.Stripe, Status: acquireraccount.Active,
		Settings: map[string]string{}, Sealed: map[string]string{"secretKey": "sealed", "webhookSecret": "sealed"},
		Masks: map[string]string{"secretKey": "sk_test_…4321", "webhookSecret": "whsec_…8765"}, CheckedAt: now, CreatedAt: now, UpdatedAt: now, Version: 1}
	testenv.Seeded(t, "connector", testenv.Stack(t).Store.CreateConnector(context.Background(), a,
		dashuser.AuditEntry{MerchantID: merchantID, At: now, Actor: "test", Action: "connector.add", Detail: "seeded"}))
}

// An admin connects a Stripe and an Adyen account on the Connectors page:
// each is checked with a harmless call (stripe-mock, Prism) before it is
// saved, listed with its masks only (no secret anywhere in a page), tested
// again, disabled and enabled; an account the acquirer refuses is not
// saved and says why with code 046. Every change has its audit entry with
// the admin's address.
func TestConnectorsPageConnectsTestsAndDisablesAccounts(t *testing.T) {
	accountDoubles(t)
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	secrets := []string{accountStripeKey, accountStripeWhsec, accountAdyenKey, accountAdyenHMAC}

	first := u.get("/dashboard/connectors")
	if first.status != http.StatusOK || !strings.Contains(first.body, "No account of your own yet") || !strings.Contains(first.body, `aria-current="page">Connectors<`) {
		t.Fatalf("empty Connectors page: %d\n%s", first.status, first.body)
	}
	token := csrfOf(t, first)
	added := u.post("/dashboard/connectors", stripeForm(token, "eustripe", accountStripeKey))
	if added.status != http.StatusOK || !strings.Contains(added.body, "Stripe account eustripe connected") {
		t.Fatalf("add Stripe: %d\n%s", added.status, added.body)
	}
	noSecret(t, "after adding", added, secrets...)
	adyen := url.Values{"csrf": {token}, "kind": {"adyen"}, "name": {"euadyen"}, "apiKey": {accountAdyenKey}, "hmacKey": {accountAdyenHMAC},
		"merchantAccount": {accountAdyenMerch}, "environment": {"test"}}
	if p := u.post("/dashboard/connectors", adyen); p.status != http.StatusOK || !strings.Contains(p.body, "Adyen account euadyen connected") {
		t.Fatalf("add Adyen: %d\n%s", p.status, p.body)
	}
	wrong := url.Values{}
	for k, v := range adyen {
		wrong[k] = v
	}
	const wrongKey = "AQEwrongwrongwrong_dashboard_0000"
	wrong.Set("name", "badkey")
	wrong.Set("apiKey", wrongKey)
	refused := u.post("/dashboard/connectors", wrong)
	if refused.status != http.StatusBadRequest || !strings.Contains(refused.body, "refused the check") || !strings.Contains(refused.body, "(046)") {
		t.Fatalf("a key Adyen refuses: %d\n%s", refused.status, refused.body)
	}
	noSecret(t, "refused Adyen key", refused, append(secrets, wrongKey)...)
	// The refused form keeps its settings, never its secrets.
	if !strings.Contains(refused.body, `id="adyen-name" name="name" required maxlength="20" pattern="[a-z][a-z0-9]*" autocomplete="off" value="badkey"`) ||
		!strings.Contains(refused.body, `value="`+accountAdyenMerch+`"`) {
		t.Errorf("the refused form lost its settings:\n%s", refused.body)
	}

	list := u.get("/dashboard/connectors")
	noSecret(t, "the list", list, secrets...)
	if got := len(accounts(t, m.ID)); got != 2 {
		t.Fatalf("%d accounts stored, want 2 (the refused one is not saved)", got)
	}
	for name, want := range map[string][]string{
		"eustripe": {"Stripe", "test", "active", "Secret key sk_test_…4321Webhook signing secret whsec_…8765"},
		"euadyen":  {"Adyen", "test", "active", "API key …_key HMAC key …A056Merchant account " + accountAdyenMerch},
	} {
		got := []string{row(t, list, name, "kind"), row(t, list, name, "mode"), row(t, list, name, "status"), row(t, list, name, "credentials")}
		for i := range want {
			if strings.ReplaceAll(got[i], " ", "") != strings.ReplaceAll(want[i], " ", "") {
				t.Errorf("%s: %q, want %q", name, got, want)
				break
			}
		}
		if row(t, list, name, "checked") == "" {
			t.Errorf("%s: no time of the last check", name)
		}
	}

	// The Stripe account's webhook address, to register at Stripe; the
	// Adyen account has none yet.
	if !strings.Contains(list.body, `<li data-name="eustripe">eustripe <code class="webhook-url">`) ||
		!strings.Contains(list.body, "/callbacks/svcwh/"+m.ID+"/eustripe</code>") || strings.Contains(list.body, `<li data-name="euadyen">`) {
		t.Errorf("webhook addresses on the page:\n%s", list.body)
	}

	before := accounts(t, m.ID)[1].CheckedAt // eustripe (by name: euadyen, eustripe)
	time.Sleep(10 * time.Millisecond)
	tested := u.post("/dashboard/connectors/test", url.Values{"csrf": {token}, "name": {"eustripe"}})
	if tested.status != http.StatusOK || !strings.Contains(tested.body, "eustripe passed the check at") {
		t.Fatalf("test: %d\n%s", tested.status, tested.body)
	}
	if after := accounts(t, m.ID)[1].CheckedAt; !after.After(before) {
		t.Errorf("the test did not record its time: %v, before %v", after, before)
	}
	if p := u.post("/dashboard/connectors/test", url.Values{"csrf": {token}, "name": {"nosuch"}}); p.status != http.StatusNotFound {
		t.Errorf("test of an unknown account: %d", p.status)
	}
	disabled := u.post("/dashboard/connectors/status", url.Values{"csrf": {token}, "name": {"eustripe"}, "action": {"disable"}})
	if disabled.status != http.StatusOK || row(t, disabled, "eustripe", "status") != "disabled" || !strings.Contains(disabled.body, `aria-label="Enable eustripe"`) {
		t.Fatalf("disable: %d\n%s", disabled.status, disabled.body)
	}
	enabled := u.post("/dashboard/connectors/status", url.Values{"csrf": {token}, "name": {"eustripe"}, "action": {"enable"}})
	if enabled.status != http.StatusOK || row(t, enabled, "eustripe", "status") != "active" {
		t.Fatalf("enable: %d\n%s", enabled.status, enabled.body)
	}
	if got := strings.Join(auditActions(t, m.ID, append(secrets, wrongKey)...), ","); got != "connector.enable,connector.disable,connector.test,connector.add,connector.add" {
		t.Errorf("audit entries, newest first: %s", got)
	}
	audit := u.get("/dashboard/audit")
	noSecret(t, "the audit log", audit, secrets...)
	if !strings.Contains(audit.body, u.email) {
		t.Error("the audit log does not name the admin who changed the accounts")
	}
}

// A key of the wrong form is refused before any call, with code 046 and the
// field's message; nothing is written, no audit entry, and the key typed
// is not in the answer.
func TestConnectorsRefusesAMalformedKeyWith046(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	const bad = "pk_test_51PayreqNotASecretKey9999"
	p := u.post("/dashboard/connectors", stripeForm(csrfOf(t, u.get("/dashboard/connectors")), "eustripe", bad))
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "(046)") ||
		!strings.Contains(html(p.body), "Secret key: is not a Stripe secret or restricted key") {
		t.Fatalf("malformed key: %d\n%s", p.status, p.body)
	}
	noSecret(t, "malformed key", p, bad, accountStripeWhsec)
	if got := accounts(t, m.ID); len(got) != 0 {
		t.Errorf("%d accounts written by a refused add", len(got))
	}
	if got := auditActions(t, m.ID); len(got) != 0 {
		t.Errorf("audit entries of a refused add: %v", got)
	}
	// A live key on a sandbox merchant: refused the same way.
	live := u.post("/dashboard/connectors", stripeForm(csrfOf(t, p), "eustripe", "sk_live_51PayreqConnectorAbcd1234"))
	if live.status != http.StatusBadRequest || !strings.Contains(live.body, "(046)") || !strings.Contains(live.body, "sandbox merchant") {
		t.Errorf("live key on a sandbox merchant: %d", live.status)
	}
}

// A member sees the accounts read-only (no form, no action) and every
// change they send is refused (403) without a write; so is a change with a
// missing, altered or another session's CSRF token, even an admin's.
func TestConnectorsChangesNeedAnAdminAndTheCSRFToken(t *testing.T) {
	m := testenv.NewMerchant(t)
	seedAccount(t, m.ID, "eustripe")

	member := newUser(t, m, dashuser.RoleMember)
	member.mustSignIn()
	page := member.get("/dashboard/connectors")
	if page.status != http.StatusOK || row(t, page, "eustripe", "status") != "active" {
		t.Fatalf("member's Connectors page: %d\n%s", page.status, page.body)
	}
	for _, control := range []string{`id="add-stripe"`, `id="add-adyen"`, `class="test"`, `class="disable"`} {
		if strings.Contains(page.body, control) {
			t.Errorf("a member is offered %s", control)
		}
	}
	token := csrfOf(t, page)
	posts := map[string]url.Values{
		"/dashboard/connectors":        stripeForm(token, "memberstripe", accountStripeKey),
		"/dashboard/connectors/test":   {"csrf": {token}, "name": {"eustripe"}},
		"/dashboard/connectors/status": {"csrf": {token}, "name": {"eustripe"}, "action": {"disable"}},
	}
	for path, form := range posts {
		if p := member.post(path, form); p.status != http.StatusForbidden {
			t.Errorf("member POST %s: %d, want 403", path, p.status)
		}
	}

	admin := newUser(t, m, dashuser.RoleAdmin)
	admin.mustSignIn()
	good := csrfOf(t, admin.get("/dashboard/connectors"))
	other := newUser(t, testenv.NewMerchant(t), dashuser.RoleAdmin)
	other.mustSignIn()
	for name, tok := range map[string]string{"missing": "", "altered": alter(good), "another session's": csrfOf(t, other.get("/dashboard/connectors"))} {
		for path, form := range posts {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			f.Set("csrf", tok)
			if p := admin.post(path, f); p.status != http.StatusForbidden {
				t.Errorf("%s token, POST %s: %d, want 403", name, path, p.status)
			}
		}
	}
	got := accounts(t, m.ID)
	if len(got) != 1 || got[0].Status != acquireraccount.Active || got[0].Version != 1 {
		t.Fatalf("a refused change wrote: %d accounts, %+v", len(got), got[0])
	}
	if acts := auditActions(t, m.ID); len(acts) != 1 {
		t.Errorf("audit entries after refused changes: %v", acts)
	}
}

// The same add sent 30 times at once creates one account and one audit
// entry: the store's write is conditional on a free name, so the others are
// refused (409) and write nothing.
func TestConnectorsSameAdd30TimesAtOnceCreatesOneAccount(t *testing.T) {
	accountDoubles(t)
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	form := stripeForm(csrfOf(t, u.get("/dashboard/connectors")), "eustripe", accountStripeKey)
	const n = 30
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i] = u.post("/dashboard/connectors", form).status
		}()
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	if counts[http.StatusOK] != 1 || counts[http.StatusConflict] != n-1 {
		t.Errorf("answers %v, want one 200 and %d 409", counts, n-1)
	}
	if got := accounts(t, m.ID); len(got) != 1 || got[0].Version != 1 {
		t.Fatalf("%d accounts stored", len(got))
	}
	adds := 0
	for _, a := range auditActions(t, m.ID, accountStripeKey, accountStripeWhsec) {
		if a == "connector.add" {
			adds++
		}
	}
	if adds != 1 {
		t.Errorf("%d connector.add audit entries, want 1", adds)
	}
}
