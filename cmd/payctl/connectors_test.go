package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/needs"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

const (
	testAdyenKey  = "AQEyhmfxLI3MaBFLw0m_payctl_test_key"
	testAdyenHMAC = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
)

// TestConnectorAccounts: a merchant's own Stripe and Adyen accounts through
// payctl against Stripe's mock server and Prism serving Adyen's
// description. Saving checks the credentials with a harmless call and
// writes nothing when it fails; secrets are sealed at rest and only their
// masks are ever printed; live credentials never serve a sandbox merchant;
// every change has its audit entry.
func TestConnectorAccounts(t *testing.T) {
	needs.External(t, "stripe-mock and Prism")
	st := testenv.Stack(t)
	m := testenv.NewMerchant(t)
	stripeBase := stripetest.Start(t, nil)
	infra, err := devstack.InfraDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := devstack.EnsureNodeModules(infra, io.Discard); err != nil {
		t.Fatal(err)
	}
	mock, err := adyenmock.Run(context.Background(), infra, t.TempDir(), testAdyenKey, testAdyenHMAC)
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Stop()
	mock.Front.SetMerchantAccount("AcmeBooksECOM")

	dir := t.TempDir()
	values := func(name string, v map[string]string) string {
		p := filepath.Join(dir, name)
		b, _ := json.Marshal(v)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const sk, whsec = "sk_test_51PayreqConnectorAbcd1234", "whsec_payreqConnectorSecret9876"
	stripeFile := values("stripe.json", map[string]string{"secretKey": sk, "webhookSecret": whsec})
	base := []string{"--merchant", m.ID, "--stripe-api-base", stripeBase, "--adyen-api-base", mock.URL}
	add := func(name, kind, file string) (map[string]any, string, int) {
		return payctl(t, append([]string{"connectors", "add", "--name", name, "--kind", kind, "--values-file", file}, base...)...)
	}

	out, stderr, code := add("eustripe", "stripe", stripeFile)
	if code != 0 {
		t.Fatalf("add stripe: exit %d: %s", code, stderr)
	}
	masked := out["masked"].(map[string]any)
	if out["status"] != "active" || masked["secretKey"] != "sk_test_…1234" || masked["webhookSecret"] != "whsec_…9876" {
		t.Fatalf("add stripe: %v", out)
	}
	if _, stderr, code := add("eustripe", "stripe", stripeFile); code != 1 || !strings.Contains(stderr, "exists") {
		t.Fatalf("the same name again: exit %d %s", code, stderr)
	}
	live := values("live.json", map[string]string{"secretKey": "sk_live_51PayreqConnectorAbcd1234", "webhookSecret": whsec})
	if _, stderr, code := add("livestripe", "stripe", live); code != 1 || !strings.Contains(stderr, "sandbox merchant") {
		t.Fatalf("live key on a sandbox merchant: exit %d %s", code, stderr)
	}
	if _, stderr, code := add("stripe", "stripe", stripeFile); code != 1 || !strings.Contains(stderr, "platform connector") {
		t.Fatalf("a platform connector's name: exit %d %s", code, stderr)
	}

	adyen := map[string]string{"apiKey": testAdyenKey, "hmacKey": testAdyenHMAC, "merchantAccount": "AcmeBooksECOM", "environment": "test"}
	if out, stderr, code := add("euadyen", "adyen", values("adyen.json", adyen)); code != 0 || out["settings"].(map[string]any)["merchantAccount"] != "AcmeBooksECOM" {
		t.Fatalf("add adyen: exit %d %v %s", code, out, stderr)
	}
	adyen["apiKey"] = "AQEwrongwrongwrong_0000"
	if _, stderr, code := add("badkey", "adyen", values("bad.json", adyen)); code != 1 || !strings.Contains(stderr, "refused the check") {
		t.Fatalf("a key Adyen refuses: exit %d %s", code, stderr)
	}
	adyen["apiKey"], adyen["merchantAccount"] = testAdyenKey, "NotMyAccount"
	if _, stderr, code := add("otheraccount", "adyen", values("other.json", adyen)); code != 1 || !strings.Contains(stderr, "refused the check") {
		t.Fatalf("an account the key does not reach: exit %d %s", code, stderr)
	}

	list, _, code := payctl(t, "connectors", "list", "--merchant", m.ID)
	if code != 0 || len(list["connectors"].([]any)) != 2 {
		t.Fatalf("list after refused saves: %v", list)
	}
	// show gives the address the merchant registers at Stripe for the
	// account's events; an Adyen account has none yet.
	if out, _, code := payctl(t, "connectors", "show", "--merchant", m.ID, "--name", "eustripe"); code != 0 ||
		!strings.HasPrefix(out["webhookUrl"].(string), "http") || !strings.HasSuffix(out["webhookUrl"].(string), "/callbacks/svcwh/"+m.ID+"/eustripe") {
		t.Fatalf("show stripe: exit %d %v", code, out)
	}
	if out, _, code := payctl(t, "connectors", "show", "--merchant", m.ID, "--name", "euadyen"); code != 0 || out["webhookUrl"] != nil {
		t.Fatalf("show adyen: exit %d %v", code, out)
	}
	raw, _ := json.Marshal(list)
	for _, secret := range []string{sk, whsec, testAdyenKey, testAdyenHMAC} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("list prints a secret: %s", raw)
		}
	}

	// At rest: sealed, never in plain text.
	cfg, _ := testenv.CountingAWSConfig(t)
	db := dynamodb.NewFromConfig(cfg)
	items, err := db.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(st.Resources.Tables["OperationsTable"]),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "connector#" + m.ID}}})
	if err != nil || len(items.Items) != 2 {
		t.Fatalf("stored accounts: %v %v", items, err)
	}
	stored, _ := json.Marshal(items.Items)
	for _, secret := range []string{sk, whsec, testAdyenKey, testAdyenHMAC} {
		if strings.Contains(string(stored), secret) {
			t.Fatalf("a secret is stored in plain text")
		}
	}

	if out, _, code := payctl(t, append([]string{"connectors", "test", "--name", "eustripe"}, base...)...); code != 0 || out["version"] != 2.0 {
		t.Fatalf("test: exit %d %v", code, out)
	}
	if out, _, code := payctl(t, "connectors", "disable", "--merchant", m.ID, "--name", "eustripe"); code != 0 || out["status"] != "disabled" {
		t.Fatalf("disable: exit %d %v", code, out)
	}
	if out, _, code := payctl(t, "connectors", "disable", "--merchant", m.ID, "--name", "eustripe"); code != 0 || out["version"] != 3.0 {
		t.Fatalf("disable again is no change: exit %d %v", code, out)
	}
	if _, _, code := payctl(t, "connectors", "show", "--merchant", m.ID, "--name", "nope"); code != 1 {
		t.Fatalf("unknown account: exit %d", code)
	}

	store := dynamo.New(db, dynamo.Tables{Operations: st.Resources.Tables["OperationsTable"]})
	entries, err := store.AuditEntries(context.Background(), m.ID, 50)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
		for _, secret := range []string{sk, whsec, testAdyenKey, testAdyenHMAC} {
			if strings.Contains(e.Detail, secret) {
				t.Fatalf("an audit entry holds a secret: %s", e.Detail)
			}
		}
	}
	if got := strings.Join(actions, ","); got != "connector.disable,connector.test,connector.add,connector.add" {
		t.Fatalf("audit entries, newest first: %s", got)
	}
}
