package checkout

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/png"
	"strings"
	"testing"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"

	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider"
)

// A QR next action reaches the page with a PNG an independent decoder reads
// back to the payload; other actions are unchanged.
func TestForPageRendersQR(t *testing.T) {
	const payload = "payreq-sandbox:qr?amount=21.40&ref=qr_1&unit=EUR"
	out, err := forPage(paycore.Result{NextAction: &provider.NextAction{Type: provider.ActionQR, QRPayload: payload, Reference: "qr_1"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out)
	var got struct {
		NextAction struct{ Type, QRPayload, QRImage, Reference string } `json:"nextAction"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	na := got.NextAction
	if na.Type != "qr" || na.QRPayload != payload || na.Reference != "qr_1" || !strings.HasPrefix(na.QRImage, qrImagePrefix) {
		t.Fatalf("nextAction %s", b)
	}
	png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(na.QRImage, qrImagePrefix))
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := image.Decode(bytes.NewReader(png))
	if err != nil {
		t.Fatal(err)
	}
	bmp, _ := gozxing.NewBinaryBitmapFromImage(img)
	res, err := qrcode.NewQRCodeReader().Decode(bmp, nil)
	if err != nil || res.GetText() != payload {
		t.Fatalf("decoded %v, %v; want %q", res, err, payload)
	}

	out, _ = forPage(paycore.Result{NextAction: &provider.NextAction{Type: provider.ActionThreeDSRedirect, URL: "/checkout/3ds"}})
	if b, _ := json.Marshal(out.NextAction); string(b) != `{"type":"threeds_redirect","url":"/checkout/3ds"}` {
		t.Errorf("3-D Secure action %s", b)
	}
	if out, _ := forPage(paycore.Result{}); out.NextAction != nil {
		t.Errorf("no action became %+v", out.NextAction)
	}
}
