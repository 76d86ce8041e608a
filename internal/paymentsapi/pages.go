package paymentsapi

import (
	"crypto/rand"
	"encoding/base64"
	"html"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
)

// The payer pages are rendered with explicit escaping rather than
// html/template: its reflection keeps every exported method of every type in
// the binary alive, which would cost the function about 4 MiB.
const pageStyle = `body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#1d2433}
.box{border:1px solid #d0d7e2;border-radius:8px;padding:1.5rem}
.tag{display:inline-block;background:#fff3cd;color:#7a5b00;border-radius:4px;padding:.1rem .4rem;font-size:.8rem}
a.btn{display:inline-block;margin:.5rem .5rem 0 0;padding:.6rem 1.2rem;border-radius:6px;text-decoration:none;color:#fff}
a.ok{background:#1a7f37} a.ko{background:#b42318}
dl{display:grid;grid-template-columns:auto 1fr;gap:.3rem 1rem}`

func renderPage(w io.Writer, d pageData) {
	e := html.EscapeString
	var b strings.Builder
	b.WriteString(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>` + e(d.Title) + `</title>
<style nonce="` + e(d.Nonce) + `">
` + pageStyle + `
</style></head><body><main class="box">
`)
	if d.Challenge {
		b.WriteString(`<p class="tag">Sandbox issuer — no real bank is contacted</p>
<h1>3-D Secure authentication</h1>
<dl><dt>Amount</dt><dd>` + e(d.Amount) + ` ` + e(d.Unit) + `</dd><dt>Transaction</dt><dd>` + e(d.Number) + `</dd>`)
		if d.Card != "" {
			b.WriteString(`<dt>Card</dt><dd>` + e(d.Card) + `</dd>`)
		}
		b.WriteString(`</dl>
<p>Choose the outcome of this authentication.</p>
<p><a class="btn ok" id="approve" href="` + e(d.ApproveURL) + `">Approve</a><a class="btn ko" id="fail" href="` + e(d.FailURL) + `">Fail</a></p>
`)
	} else {
		b.WriteString(`<h1>` + e(d.Title) + `</h1><p id="result" data-status="` + strconv.Itoa(d.Status) + `">` + e(d.Message) + `</p>`)
		if d.Number != "" {
			b.WriteString(`<p>Transaction ` + e(d.Number) + `</p>`)
		}
		b.WriteString("\n")
	}
	b.WriteString(`</main></body></html>`)
	_, _ = io.WriteString(w, b.String())
}

type pageData struct {
	Title, Nonce         string
	Challenge            bool
	Amount, Unit, Number string
	Card                 string
	ApproveURL, FailURL  string
	Status               int
	Message              string
}

// pageHeaders: no script at all, styles only with the page's nonce, no
// forms, framing only by this service and the merchant's registered origins
// (the hosted checkout runs the challenge inside its iframe).
func pageHeaders(w http.ResponseWriter, nonce string, frameAncestors []string) {
	fa := "'self'"
	for _, o := range frameAncestors {
		fa += " " + o
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+nonce+"'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors "+fa)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b)
}

// writeChallengePage serves the sandbox issuer's challenge for tx.
func writeChallengePage(s *paycore.Service, w http.ResponseWriter, tx *payment.Transaction, returnTo string, origins []string) {
	d := pageData{Title: "3-D Secure authentication", Nonce: newNonce(), Challenge: true,
		Amount: string(payment.DisplayAmount(tx.Amount, tx.Unit)), Unit: tx.Unit, Number: tx.Number,
		ApproveURL: s.ChallengeLink(tx, "approve", returnTo),
		FailURL:    s.ChallengeLink(tx, "fail", returnTo)}
	if tx.Card != nil {
		d.Card = tx.Card.String()
	}
	pageHeaders(w, d.Nonce, origins)
	w.WriteHeader(http.StatusOK)
	renderPage(w, d)
}

// WriteResultPage shows the state of a transaction to a payer's browser
// (the end of a 3-D Secure challenge without a return URL). tx may be nil.
func WriteResultPage(w http.ResponseWriter, status int, tx *payment.Transaction, origins []string, note string) {
	d := pageData{Title: "Payment", Nonce: newNonce(), Message: note}
	if tx != nil {
		d.Number, d.Status = tx.Number, int(tx.Status)
		switch tx.Status {
		case payment.TxApproved:
			d.Title, d.Message = "Payment approved", "The payment was approved. You can close this page."
		case payment.TxDeclined:
			d.Title, d.Message = "Payment declined", "The payment was declined: "+tx.Message+"."
		case payment.TxPending:
			d.Title, d.Message = "Payment pending", "The payment is still being processed."
		}
	}
	pageHeaders(w, d.Nonce, origins)
	w.WriteHeader(status)
	renderPage(w, d)
}
