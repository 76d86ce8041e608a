package lostanswer

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
)

// An admin removes a person of two merchants from the run's merchant: the
// person's open session loses that merchant at once and keeps the other.
func TestLostAnswerDashboardRemoveMembership(t *testing.T) {
	var admin, gone *browser
	sweep(t, path{name: "dashboard membership removed",
		setup: func(r *run) {
			admin = withAdmin(r)
			admin.signIn(at(r, "/overview"))
			other := testenv.NewMerchant(r.t)
			r.vars["other"] = other.ID
			email := "leaving." + strings.ToLower(r.m.ID) + "@shop.example"
			person(r, email, dashuser.RoleMember, r.m.ID, other.ID)
			gone = newBrowser(r, email)
			gone.signIn("/dashboard/merchants")
			if p := gone.do("GET", at(r, "/overview"), nil); p.status != http.StatusOK {
				r.t.Fatalf("before the removal: %d", p.status)
			}
		},
		act: func(r *run) {
			p := admin.do("POST", at(r, "/users/remove"), url.Values{"csrf": {admin.csrf(at(r, "/users"))}, "email": {gone.email}})
			if p.status != http.StatusOK || !strings.Contains(p.body, "was removed") {
				r.t.Fatalf("remove: %d (a lost answer must not fail a removal that applied)\n%.400s", p.status, p.body)
			}
			if p := gone.do("GET", at(r, "/overview"), nil); p.status != http.StatusNotFound {
				r.t.Fatalf("the removed person's session at the merchant: %d, want 404", p.status)
			}
			if p := gone.do("GET", dashboard.MerchantPath(r.vars["other"], "/overview"), nil); p.status != http.StatusOK {
				r.t.Fatalf("the removed person's other merchant: %d", p.status)
			}
		},
		want: none})
}

// A key rotated with a 1-hour overlap, then the old key ended early: it is
// refused from then on, the new one works.
func TestLostAnswerDashboardEndPreviousKey(t *testing.T) {
	var admin *browser
	sweep(t, path{name: "previous API key ended early",
		setup: func(r *run) {
			admin = withAdmin(r)
			admin.signIn(at(r, "/overview"))
			p := admin.do("POST", at(r, "/profile/api-key"), url.Values{"csrf": {admin.csrf(at(r, "/profile"))}, "overlap": {"1h"}})
			m := newKeyRE.FindStringSubmatch(p.body)
			if p.status != http.StatusOK || m == nil {
				r.t.Fatalf("rotate: %d", p.status)
			}
			r.vars["key"] = m[1]
		},
		act: func(r *run) {
			p := admin.do("POST", at(r, "/profile/api-key"), url.Values{"csrf": {admin.csrf(at(r, "/profile"))}, "action": {"end-previous"}})
			if p.status != http.StatusOK || !strings.Contains(p.body, "is refused from now on") {
				r.t.Fatalf("end the previous key: %d (a lost answer must not fail an end that applied)\n%.400s", p.status, p.body)
			}
			if resp := testenv.Do(r.t, "POST", r.api+"/payment-requests", r.m.APIKey, `{"amount":1,"unit":"EUR"}`); resp.Status != http.StatusUnauthorized {
				r.t.Fatalf("the ended key: %d, want 401", resp.Status)
			}
			if resp := testenv.Do(r.t, "POST", r.api+"/payment-requests", r.vars["key"], `{"amount":1,"unit":"EUR"}`); resp.Status != http.StatusCreated {
				r.t.Fatalf("the new key: %d %s", resp.Status, resp.Body)
			}
		},
		want: want{requests: 1}})
}

// seedLegacy stores a dashboard user as the service stored them before
// identities (per merchant, with its own password).
func seedLegacy(r *run, merchantID, email, role, pw string) {
	r.t.Helper()
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	hash, err := sftpauth.HashPassword(pw)
	if err != nil {
		r.t.Fatal(err)
	}
	at := time.Now().UTC().Format(time.RFC3339Nano)
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 10 })
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(r.st.Tables().Operations),
		Item: map[string]types.AttributeValue{"pk": s("dashmuser#" + merchantID), "sk": s(email), "email": s(email), "merchantId": s(merchantID),
			"role": s(role), "passwordHash": s(hash), "createdAt": s(at), "updatedAt": s(at), "version": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
		r.t.Fatal(err)
	}
}

// payctl merchant user migrate (the store call it makes, with the
// production client's three attempts), then the two-passwords person's
// first sign-in, which proves one password, and the link of the other
// membership with its own password.
func TestLostAnswerDashboardMigration(t *testing.T) {
	const pwSingle, pw1, pw2 = "the single user's password", "the password at merchant one", "the password at merchant two"
	sweep(t, path{name: "payctl merchant user migrate, first sign-in and link",
		setup: func(r *run) {
			other := testenv.NewMerchant(r.t)
			r.vars["other"] = other.ID
			r.vars["single"] = "single." + strings.ToLower(r.m.ID) + "@shop.example"
			r.vars["twice"] = "twice." + strings.ToLower(r.m.ID) + "@shop.example"
			seedLegacy(r, r.m.ID, r.vars["single"], dashuser.RoleAdmin, pwSingle)
			seedLegacy(r, r.m.ID, r.vars["twice"], dashuser.RoleAdmin, pw1)
			seedLegacy(r, other.ID, r.vars["twice"], dashuser.RoleMember, pw2)
		},
		act: func(r *run) {
			cfg, err := awsconfig.Load(context.Background())
			if err != nil {
				r.t.Fatal(err)
			}
			store := dynamo.New(dynamodb.NewFromConfig(cfg), r.st.Tables())
			rep, err := store.MigrateDashboardUsers(context.Background(), time.Now().UTC())
			if err != nil {
				r.t.Fatalf("migrate: %v", err)
			}
			if rep != (dynamo.MigrationReport{Identities: 1, Unproven: 2}) {
				r.t.Fatalf("migrate: %+v, want 1 identity and 2 unproven (a lost answer must not leave a user behind or count one twice)", rep)
			}
			if rep, err := store.MigrateDashboardUsers(context.Background(), time.Now().UTC()); err != nil || rep != (dynamo.MigrationReport{}) {
				r.t.Fatalf("the second run: %+v %v, want nothing to do", rep, err)
			}
			single := newBrowser(r, r.vars["single"])
			p := single.do("POST", "/dashboard/login", url.Values{"csrf": {single.csrf("/dashboard/login")}, "email": {single.email}, "password": {pwSingle}})
			if p.status != http.StatusSeeOther || p.location != at(r, "/overview") {
				r.t.Fatalf("the single user's sign-in: %d %s", p.status, p.location)
			}
			b := newBrowser(r, r.vars["twice"])
			p = b.do("POST", "/dashboard/login", url.Values{"csrf": {b.csrf("/dashboard/login")}, "email": {b.email}, "password": {pw2}})
			if p.status != http.StatusSeeOther || p.location != "/dashboard/merchants" {
				r.t.Fatalf("first sign-in with merchant two's password: %d %s", p.status, p.location)
			}
			if p := b.do("GET", at(r, "/overview"), nil); p.status != http.StatusNotFound {
				r.t.Fatalf("merchant one opened before its own password: %d", p.status)
			}
			p = b.do("POST", "/dashboard/merchants/link", url.Values{"csrf": {b.csrf("/dashboard/merchants")}, "merchant": {r.m.ID}, "password": {pw1}})
			if p.status != http.StatusSeeOther || p.location != at(r, "/overview") {
				r.t.Fatalf("link merchant one with its password: %d %s (a lost answer must not fail a link that applied)\n%.400s", p.status, p.location, p.body)
			}
			for _, m := range []string{r.m.ID, r.vars["other"]} {
				if p := b.do("GET", dashboard.MerchantPath(m, "/overview"), nil); p.status != http.StatusOK {
					r.t.Fatalf("%s after the link: %d", m, p.status)
				}
			}
		},
		want: none})
}
