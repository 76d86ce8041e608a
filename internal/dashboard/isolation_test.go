package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/testenv"
)

// payH2H creates and pays a payment request through the real API (sandbox
// selector 1 approves) and returns its id and transaction id.
func payH2H(t *testing.T, m testenv.Merchant, ref string, extra ...string) (int64, int64) {
	t.Helper()
	body := map[string]any{"amount": 12.5, "unit": "EUR", "referenceId": ref, "name": "Ann Lee", "email": "payer@example.com",
		"phoneNumber": "4915112345678", "address": "1 Main St", "city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE"}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i]] = extra[i+1]
	}
	resp := testenv.Do(t, "POST", testenv.Stack(t).Info.APIBase+"/payments/h2h/1", m.APIKey, body)
	if resp.Status != http.StatusOK {
		t.Fatalf("pay: %d %s", resp.Status, resp.Body)
	}
	var out struct {
		PaymentRequestID  int64 `json:"paymentRequestId"`
		TransactionID     int64 `json:"transactionId"`
		TransactionStatus int   `json:"transactionStatusId"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil || out.TransactionStatus != 1 {
		t.Fatalf("pay: %s (%v)", resp.Body, err)
	}
	return out.PaymentRequestID, out.TransactionID
}

// A merchant's people never see or change another merchant's data, on
// every route: the table must name every route the dashboard serves. Then
// every merchant route is sent again with the other merchant's id in its
// address (a person who is not its member): 404, and nothing changes.
func TestAMerchantsUserNeverReachesAnotherMerchantsData(t *testing.T) {
	a, b := testenv.NewMerchant(t), testenv.NewMerchant(t)
	ua := newUser(t, a, dashuser.RoleAdmin)
	ub := newUser(t, b, dashuser.RoleAdmin)
	ub2 := newUser(t, b, dashuser.RoleMember) // a person of B's whom A invites too
	ua.mustSignIn()
	bRef := "iso-b-" + dashuser.NewToken()[:12]
	bReq, bTx := payH2H(t, b, bRef)
	bReqS, bTxS := strconv.FormatInt(bReq, 10), strconv.FormatInt(bTx, 10)
	// The same searches find A's own payment: the list is not empty by accident.
	aRef := "iso-a-" + dashuser.NewToken()[:12]
	aReq, _ := payH2H(t, a, aRef)
	if p := ua.get("/dashboard/payments?ref=" + aRef); !strings.Contains(p.body, "/payments/"+strconv.FormatInt(aReq, 10)) {
		t.Fatalf("A's own payment is not listed:\n%s", p.body)
	}
	if p := ua.get("/dashboard/payments/" + strconv.FormatInt(aReq, 10)); p.status != http.StatusOK {
		t.Fatalf("A's own payment: %d", p.status)
	}
	store := testenv.Stack(t).Store
	before, err := store.Merchant(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	idBefore, _, err := store.Identity(context.Background(), ub2.email)
	if err != nil || idBefore == nil {
		t.Fatal(err)
	}
	// B's person keeps a live session: removing or demoting it must not happen.
	ub.mustSignIn()
	// B's own acquirer account, with its audit entry.
	const bAccount = "isolationb"
	seedAccount(t, b.ID, bAccount)
	bEntries, err := store.AuditEntries(context.Background(), b.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing of B may appear on A's pages.
	secrets := []string{b.ID, bReqS, bTxS, bRef, ub.email, bAccount}
	token := func() string { return csrfOf(t, ua.get("/dashboard/profile")) }
	type check struct {
		method, path string
		form         url.Values
		status       int  // 0: any status, but no trace of B
		echo         bool // the page repeats a typed value of B's (a search term, an invited address) by design
	}
	cases := map[string][]check{
		"GET /dashboard":                      {{method: "GET", path: "/dashboard", status: http.StatusSeeOther}},
		"GET /dashboard/assets/{file}":        {{method: "GET", path: "/dashboard/assets/dashboard.css", status: 200}},
		"GET /dashboard/login":                {{method: "GET", path: "/dashboard/login", status: 200}},
		"POST /dashboard/login":               {{method: "POST", path: "/dashboard/login", form: url.Values{"email": {ub.email}, "password": {password}}, status: http.StatusForbidden}},
		"GET /dashboard/totp":                 {{method: "GET", path: "/dashboard/totp", status: http.StatusSeeOther}},
		"POST /dashboard/totp":                {{method: "POST", path: "/dashboard/totp", form: url.Values{"code": {"123456"}}, status: http.StatusSeeOther}},
		"GET /dashboard/set-password":         {{method: "GET", path: "/dashboard/set-password?token=x", status: 404}},
		"POST /dashboard/set-password":        {{method: "POST", path: "/dashboard/set-password", form: url.Values{"token": {"x"}}, status: 404}},
		"GET /dashboard/merchants":            {{method: "GET", path: "/dashboard/merchants", status: 200}},
		"POST /dashboard/merchants/switch":    {{method: "POST", path: "/dashboard/merchants/switch", form: url.Values{"merchant": {b.ID}}, status: 404}},
		"POST /dashboard/merchants/accept":    {{method: "POST", path: "/dashboard/merchants/accept", form: url.Values{"merchant": {b.ID}}, status: 404}},
		"POST /dashboard/merchants/link":      {{method: "POST", path: "/dashboard/merchants/link", form: url.Values{"merchant": {b.ID}, "password": {password}}, status: 404}},
		"GET /dashboard/account":              {{method: "GET", path: "/dashboard/account", status: 200}},
		"POST /dashboard/account/totp":        {{method: "POST", path: "/dashboard/account/totp", form: url.Values{"code": {"000000"}, "sealed": {"x"}}, status: 400}},
		"GET /dashboard/m/{merchant}/profile": {{method: "GET", path: "/dashboard/profile", status: 200}},
		"POST /dashboard/m/{merchant}/profile": {{method: "POST", path: "/dashboard/profile",
			form: url.Values{"notifyUrl": {"https://a.example/n"}, "notificationFormat": {"json"}}, status: 200}},
		"POST /dashboard/m/{merchant}/profile/api-key": {{method: "POST", path: "/dashboard/profile/api-key", form: url.Values{}, status: 200}},
		"POST /dashboard/m/{merchant}/profile/webhook-secret": {{method: "POST", path: "/dashboard/profile/webhook-secret",
			form: url.Values{"action": {"rotate"}}, status: 200}},
		"POST /dashboard/m/{merchant}/profile/sftp": {{method: "POST", path: "/dashboard/profile/sftp",
			form: url.Values{"action": {"password"}, "password": {"a-new-sftp-password"}}, status: 200}},
		"GET /dashboard/m/{merchant}/overview": {{method: "GET", path: "/dashboard/overview?period=30d", status: 200}},
		"GET /dashboard/m/{merchant}/payments": {{method: "GET", path: "/dashboard/payments", status: 200},
			{method: "GET", path: "/dashboard/payments?ref=" + bRef, status: 200, echo: true}},
		"GET /dashboard/m/{merchant}/payments/export": {{method: "GET", path: "/dashboard/payments/export", status: 200},
			{method: "GET", path: "/dashboard/payments/export?ref=" + bRef, status: 200}},
		"GET /dashboard/m/{merchant}/payments/{id}": {{method: "GET", path: "/dashboard/payments/" + bReqS, status: 404}},
		"POST /dashboard/m/{merchant}/payments/{id}/redeliver": {{method: "POST", path: "/dashboard/payments/" + bReqS + "/redeliver",
			form: url.Values{}, status: 404}},
		"GET /dashboard/m/{merchant}/payments/{id}/refund": {{method: "GET", path: "/dashboard/payments/" + bReqS + "/refund?tx=" + bTxS, status: 404}},
		"POST /dashboard/m/{merchant}/payments/{id}/refund": {{method: "POST", path: "/dashboard/payments/" + bReqS + "/refund",
			form: url.Values{"tx": {bTxS}, "confirm": {"yes"}}, status: 404}},
		"GET /dashboard/m/{merchant}/batches": {{method: "GET", path: "/dashboard/batches", status: 200}},
		"GET /dashboard/m/{merchant}/batches/result": {{method: "GET", path: "/dashboard/batches/result?file=" + url.QueryEscape("orders.csv.result.csv"),
			status: 404}},
		"GET /dashboard/m/{merchant}/users": {{method: "GET", path: "/dashboard/users", status: 200}},
		// Inviting an address B's person uses invites that person to A: the
		// page repeats the typed address, nothing of B's.
		"POST /dashboard/m/{merchant}/users": {{method: "POST", path: "/dashboard/users", form: url.Values{"email": {ub2.email}, "role": {"admin"}},
			status: 200}},
		"POST /dashboard/m/{merchant}/users/role": {{method: "POST", path: "/dashboard/users/role",
			form: url.Values{"email": {ub.email}, "role": {"member"}}, status: 404}},
		"POST /dashboard/m/{merchant}/users/remove": {{method: "POST", path: "/dashboard/users/remove", form: url.Values{"email": {ub.email}}, status: 404}},
		"GET /dashboard/m/{merchant}/audit":         {{method: "GET", path: "/dashboard/audit", status: 200}},
		"GET /dashboard/m/{merchant}/connectors":    {{method: "GET", path: "/dashboard/connectors", status: 200}},
		// Connecting an account of B's name is A's own (refused here for its
		// key): the page repeats the typed name, nothing of B's.
		"POST /dashboard/m/{merchant}/connectors": {{method: "POST", path: "/dashboard/connectors",
			form:   url.Values{"kind": {"stripe"}, "name": {bAccount}, "secretKey": {"pk_test_notasecret1234"}, "webhookSecret": {"whsec_isolation1234"}},
			status: 400, echo: true}},
		"POST /dashboard/m/{merchant}/connectors/test": {{method: "POST", path: "/dashboard/connectors/test", form: url.Values{"name": {bAccount}}, status: 404}},
		"POST /dashboard/m/{merchant}/connectors/status": {{method: "POST", path: "/dashboard/connectors/status",
			form: url.Values{"name": {bAccount}, "action": {"disable"}}, status: 404}},
		"POST /dashboard/logout": {{method: "POST", path: "/dashboard/logout", form: url.Values{}, status: http.StatusSeeOther}},
	}
	for _, route := range dashboard.Routes() {
		checks, ok := cases[route]
		if !ok {
			t.Errorf("route %s has no isolation case", route)
			continue
		}
		if route == "POST /dashboard/logout" {
			continue // last: it ends the session
		}
		for _, c := range checks {
			sec := secrets
			if c.echo {
				sec = []string{b.ID, bReqS, bTxS, ub.email}
			}
			run(t, ua, c.method, c.path, c.form, c.status, token, sec)
		}
	}
	// Every merchant route at B's address: A's person is not B's member.
	for _, route := range dashboard.Routes() {
		method, pattern, _ := strings.Cut(route, " ")
		if !strings.HasPrefix(pattern, "/dashboard/m/{merchant}") {
			continue
		}
		path := strings.NewReplacer("{merchant}", b.ID, "{id}", bReqS).Replace(pattern)
		var form url.Values
		if method == http.MethodPost {
			form = url.Values{"tx": {bTxS}, "confirm": {"yes"}, "email": {ub.email}, "role": {"member"}, "action": {"rotate"},
				"notifyUrl": {"https://a.example/n"}, "password": {"a-new-sftp-password"}, "name": {bAccount}}
		}
		run(t, ua, method, path, form, http.StatusNotFound, token, []string{bReqS, bTxS, bRef, ub.email})
	}
	c := cases["POST /dashboard/logout"][0]
	run(t, ua, c.method, c.path, c.form, c.status, token, secrets)

	after, err := store.Merchant(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version || after.APIKeyHash != before.APIKeyHash || after.NotifyURL != before.NotifyURL || after.SealedSecret != before.SealedSecret {
		t.Error("merchant B changed")
	}
	tx, err := store.Transaction(context.Background(), bTx)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Refund != nil {
		t.Error("B's transaction was refunded")
	}
	if m, err := store.Membership(context.Background(), ub.email, b.ID); err != nil || !m.Usable() || m.Role != dashuser.RoleAdmin {
		t.Errorf("B's admin changed: %+v %v", m, err)
	}
	if m, err := store.Membership(context.Background(), ub2.email, b.ID); err != nil || !m.Usable() || m.Role != dashuser.RoleMember {
		t.Errorf("B's member whom A invited changed: %+v %v", m, err)
	}
	if id, _, err := store.Identity(context.Background(), ub2.email); err != nil || id.Version != idBefore.Version || id.PasswordHash != idBefore.PasswordHash {
		t.Errorf("the identity of the person A invited changed: %+v %v", id, err)
	}
	if p := ub.get("/dashboard/users"); p.status != http.StatusOK {
		t.Errorf("B's admin lost its session or role: %d", p.status)
	}
	if sftp, err := store.SFTPUserRecord(context.Background(), b.ID); err == nil && sftp.PasswordHash != "" {
		t.Error("B's SFTP user got a password")
	}
	if e, err := store.AuditEntries(context.Background(), b.ID, 10); err != nil || len(e) != len(bEntries) {
		t.Errorf("B's audit log has new entries: %v %v", e, err)
	}
	if acc, err := store.Connector(context.Background(), b.ID, bAccount); err != nil || acc.Version != 1 || acc.Status != "active" {
		t.Errorf("B's acquirer account changed: %+v %v", acc, err)
	}
}

func run(t *testing.T, u *user, method, path string, form url.Values, status int, token func() string, secrets []string) {
	t.Helper()
	var p page
	if method == http.MethodPost {
		if form.Get("csrf") == "" && !strings.HasPrefix(path, "/dashboard/login") && !strings.HasPrefix(path, "/dashboard/set-password") {
			form.Set("csrf", token())
		}
		p = u.post(path, form)
	} else {
		p = u.get(path)
	}
	if status != 0 && p.status != status {
		t.Errorf("%s %s: %d, want %d\n%.600s", method, path, p.status, status, p.body)
	}
	for _, s := range secrets {
		if strings.Contains(p.body, s) {
			t.Errorf("%s %s shows %q of the other merchant", method, path, s)
		}
	}
}
