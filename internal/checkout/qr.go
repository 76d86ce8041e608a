package checkout

import (
	"encoding/base64"
	"fmt"

	"rsc.io/qr"

	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider"
)

// qrScale is the size of one module in pixels: a typical UPI or EMVCo
// payload (version 5 to 10) gives a 300 to 500 px image, which phone cameras
// read from a laptop screen.
const qrScale = 8

// qrImagePrefix starts every qrImage the page accepts; the page shows no
// other URL (the CSP allows data: images only for this).
const qrImagePrefix = "data:image/png;base64,"

// qrDataURL renders payload as a QR code (error correction M, the usual
// compromise for on-screen codes) in a PNG data: URL. The code is drawn here
// rather than in the browser so the page needs no encoder script and the
// image is the same wherever the page runs.
func qrDataURL(payload string) (string, error) {
	c, err := qr.Encode(payload, qr.M)
	if err != nil {
		return "", fmt.Errorf("encode QR payload: %w", err)
	}
	c.Scale = qrScale
	return qrImagePrefix + base64.StdEncoding.EncodeToString(c.PNG()), nil
}

// pageResult is a payment result as the hosted page receives it: a QR next
// action carries its rendered image.
type pageResult struct {
	paycore.Result
	NextAction *pageAction `json:"nextAction,omitempty"`
}

type pageAction struct {
	provider.NextAction
	QRImage string `json:"qrImage,omitempty"`
}

func forPage(res paycore.Result) (pageResult, error) {
	out := pageResult{Result: res}
	if na := res.NextAction; na != nil {
		out.NextAction = &pageAction{NextAction: *na}
		if na.Type == provider.ActionQR && na.QRPayload != "" {
			img, err := qrDataURL(na.QRPayload)
			if err != nil {
				return out, err
			}
			out.NextAction.QRImage = img
		}
	}
	return out, nil
}
