package callbacks

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider/adyen"
)

const testAdyenKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

func adyenServer(t *testing.T, hook bool) (*httptest.Server, *fakeSettler) {
	fs := &fakeSettler{done: map[int64]paycore.ProviderResult{}}
	d := Deps{Key: []byte("k")}
	if hook {
		d.Adyen = &AdyenWebhook{Reader: adyen.Webhook{HMACKeys: []string{"00", testAdyenKey}, MerchantAccount: "PayreqECOM"},
			IsSignatureError: func(err error) bool { return errors.Is(err, adyen.ErrSignature) },
			Events:           &memMarker{seen: map[string]bool{}}, Settler: fs}
	}
	srv := httptest.NewServer(New(d))
	t.Cleanup(srv.Close)
	return srv, fs
}

// authorisation is a signed AUTHORISATION item of transaction txID, as
// Adyen (and adyenmock's front) sends it.
func authorisation(t *testing.T, txID string, key string) []byte {
	t.Helper()
	it := adyenmock.Item{AdditionalData: map[string]string{"metadata.payreqTx": txID, "metadata.payreqPr": "77"},
		Amount: adyenmock.Amount{Currency: "EUR", Value: 1999}, EventCode: "AUTHORISATION", MerchantAccountCode: "PayreqECOM",
		MerchantReference: "ptx_" + txID, PSPReference: "9913140798220028", Success: "true"}
	var ni adyen.NotificationItem
	b, _ := json.Marshal(it)
	if err := json.Unmarshal(b, &ni); err != nil {
		t.Fatal(err)
	}
	sig, err := adyen.Sign(ni, key)
	if err != nil {
		t.Fatal(err)
	}
	it.AdditionalData["hmacSignature"] = sig
	return adyenmock.Body([]adyenmock.Item{it})
}

func post(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Adyen's webhooks on /callbacks/adyen: a signed item settles its payment
// and is answered "[accepted]"; a redelivery is accepted and changes
// nothing; an item signed with another key is refused (401) and settles
// nothing; an item of no transaction of this stack is accepted as ignored;
// a body that is not a notification is 400; without an Adyen connector
// the address is 404.
func TestAdyenWebhookAcceptsSignedAndRefusesForged(t *testing.T) {
	srv, fs := adyenServer(t, true)
	forged := authorisation(t, "42", "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF")
	if st, body := post(t, srv.URL+AdyenPath, forged); st != 401 || fs.n != 0 {
		t.Fatalf("forged HMAC: %d %s, %d settles", st, body, fs.n)
	}
	for i := range 2 {
		if st, body := post(t, srv.URL+AdyenPath, authorisation(t, "42", testAdyenKey)); st != 200 || body != AdyenAccepted {
			t.Fatalf("delivery %d: %d %q", i, st, body)
		}
	}
	if r, ok := fs.done[42]; !ok || fs.n != 2 || r.ProviderRef != "9913140798220028" || r.Facts == nil || r.Facts.Reference != "ptx_42" {
		t.Fatalf("settled %+v (%d calls), want transaction 42 bound by its PSP reference and reference", r, fs.n)
	}
	if st, body := post(t, srv.URL+AdyenPath, authorisation(t, "404", testAdyenKey)); st != 200 || body != AdyenAccepted {
		t.Fatalf("unknown transaction: %d %q (want accepted, ignored)", st, body)
	}
	if st, _ := post(t, srv.URL+AdyenPath, []byte(`{"nope":1}`)); st != 400 {
		t.Fatalf("not a notification: %d", st)
	}
	none, _ := adyenServer(t, false)
	if st, _ := post(t, none.URL+AdyenPath, authorisation(t, "42", testAdyenKey)); st != 404 {
		t.Fatalf("without an Adyen connector: %d, want 404", st)
	}
}
