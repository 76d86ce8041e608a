package dashboard

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
)

// The pages. Each view reads the values its handler put in d.

type view struct {
	title string
	body  func(p *pw, d map[string]any)
}

var views = map[string]view{
	"login":       {"Sign in", viewLogin},
	"totp":        {"Two-factor sign-in", viewTOTP},
	"setpassword": {"Set your password", viewSetPassword},
	"error":       {"Problem", viewError},
	"profile":     {"Profile", viewProfile},
	"account":     {"Account", viewAccount},
	"overview":    {"Overview", viewOverview},
	"payments":    {"Payments", viewPayments},
	"payment":     {"Payment request", viewPayment},
	"refund":      {"Refund", viewRefund},
	"batches":     {"Batches", viewBatches},
	"users":       {"Users", viewUsers},
	"audit":       {"Audit log", viewAudit},
	"connectors":  {"Connectors", viewConnectors},
	"merchants":   {"Your merchants", viewMerchants},
}

func str(d map[string]any, k string) string { s, _ := d[k].(string); return s }
func flag(d map[string]any, k string) bool  { b, _ := d[k].(bool); return b }

// navItems are a merchant's pages (their addresses under its base).
var navItems = []struct{ rest, label, page string }{
	{"/overview", "Overview", "overview"},
	{"/payments", "Payments", "payments"},
	{"/batches", "Batches", "batches"},
	{"/profile", "Profile", "profile"},
	{"/connectors", "Connectors", "connectors"},
	{"/users", "Users", "users"},
	{"/audit", "Audit log", "audit"},
}

func layout(p *pw, v view, d map[string]any) {
	p.base = str(d, "Base")
	p.f(`<!doctype html>
<html lang="en" data-locale="%s">
<head>
`, str(d, "Locale"))
	p.raw(`<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
`)
	p.f("<title>%s · PayReq dashboard</title>\n", v.title)
	p.raw(`<link rel="stylesheet" href="/dashboard/assets/dashboard.css">
<script src="/dashboard/assets/dashboard.js" defer></script>
</head>
<body>
<header class="top">
<a class="brand" href="/dashboard">PayReq dashboard</a>
`)
	if csrf := str(d, "CSRF"); csrf != "" {
		header(p, d, csrf)
	}
	p.raw("</header>\n<main id=\"main\">\n")
	if n := str(d, "Notice"); n != "" {
		p.f(`<p class="notice" role="status">%s</p>`, n)
	}
	if e := str(d, "Error"); e != "" {
		p.f(`<p class="error" role="alert">%s</p>`, e)
	}
	v.body(p, d)
	p.raw("\n</main>\n</body>\n</html>\n")
}

// header is a signed-in page's header: the merchant in use and the
// switcher (the person's other merchants), that merchant's pages, the
// person's account and sign-out. The switcher and sign-out are forms of
// the person (their token may be this page's: see signedInPerson).
func header(p *pw, d map[string]any, csrf string) {
	s := d["Session"].(*dashuser.Session)
	merchants, _ := d["Merchants"].([]*dashuser.Membership)
	page := str(d, "Page")
	if page == "payment" || page == "refund" {
		page = "payments"
	}
	current := "Choose a merchant"
	for _, m := range merchants {
		if m.MerchantID == s.MerchantID {
			current = merchantLabel(m)
		}
	}
	p.raw(`<details class="switcher" id="switcher"><summary>`)
	p.f(`<span class="current-merchant" id="current-merchant">%s</span></summary><div class="menu">`, current)
	if len(merchants) > 1 || (len(merchants) == 1 && s.MerchantID == "") {
		p.raw(`<form method="post" action="/dashboard/merchants/switch">`)
		p.csrf(csrf)
		p.raw(`<ul>`)
		for _, m := range merchants {
			if m.MerchantID == s.MerchantID {
				continue
			}
			p.f(`<li><button type="submit" name="merchant" value="%s" class="link">%s <span class="hint">%s</span></button></li>`,
				m.MerchantID, merchantLabel(m), m.Role)
		}
		p.raw(`</ul></form>`)
	}
	p.raw(`<p><a href="/dashboard/merchants">All your merchants</a></p></div></details>`)
	p.raw(`<nav aria-label="Main"><ul>`)
	if s.MerchantID != "" {
		for _, n := range navItems {
			if (n.page == "users" || n.page == "audit") && !flag(d, "Admin") {
				continue
			}
			if n.page == page {
				p.f(`<li><a href="%s" aria-current="page">%s</a></li>`, p.at(n.rest), n.label)
			} else {
				p.f(`<li><a href="%s">%s</a></li>`, p.at(n.rest), n.label)
			}
		}
	}
	if page == "account" {
		p.raw(`<li><a href="/dashboard/account" aria-current="page">Account</a></li>`)
	} else {
		p.raw(`<li><a href="/dashboard/account">Account</a></li>`)
	}
	p.raw("</ul></nav>\n")
	p.raw(`<form method="post" action="/dashboard/logout" class="logout">`)
	p.csrf(csrf)
	who := s.Email
	if s.MerchantID != "" {
		who += " · " + s.Role
	}
	p.f(`<span class="who">%s</span><button type="submit">Sign out</button></form>`, who)
}

// merchantLabel names a merchant in the picker and the switcher.
func merchantLabel(m *dashuser.Membership) string {
	if m.MerchantName == "" {
		return m.MerchantID
	}
	return m.MerchantName + " (" + m.MerchantID + ")"
}

func viewLogin(p *pw, d map[string]any) {
	p.raw(`<h1>Sign in</h1><form method="post" action="/dashboard/login" class="narrow">`)
	p.csrf(str(d, "LoginToken"))
	p.f(`<label for="email">E-mail</label>
<input id="email" name="email" type="email" autocomplete="username" required value="%s">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button></form>
<p class="hint">One sign-in for every merchant you work for: you choose the merchant next. No account yet? A merchant's administrator sends you an invitation link.</p>`, str(d, "Email"))
}

// viewMerchants is the picker: the merchants the person works for, open
// invitations, and memberships awaiting the password that merchant knew.
func viewMerchants(p *pw, d map[string]any) {
	csrf := str(d, "CSRF")
	active, _ := d["Active"].([]*dashuser.Membership)
	invited, _ := d["Invited"].([]*dashuser.Membership)
	unproven, _ := d["Unproven"].([]*dashuser.Membership)
	p.raw(`<h1>Your merchants</h1>`)
	if len(active) == 0 {
		p.raw(`<p>You work for no merchant yet: a merchant's administrator invites you.</p>`)
	} else {
		p.raw(`<p>Choose a merchant; each opens in its own address, so two tabs can hold two merchants.</p><ul class="merchants" id="merchants">`)
		for _, m := range active {
			p.f(`<li><a href="%s" class="merchant" data-merchant="%s">%s</a> <span class="hint">%s</span></li>`,
				MerchantPath(m.MerchantID, "/overview"), m.MerchantID, merchantLabel(m), m.Role)
		}
		p.raw(`</ul>`)
	}
	if len(invited) > 0 {
		p.raw(`<h2>Invitations</h2><ul class="merchants" id="invitations">`)
		for _, m := range invited {
			p.f(`<li><span>%s as %s</span> <span class="hint">open until %s</span> <form method="post" action="/dashboard/merchants/accept" class="inline">`,
				merchantLabel(m), m.Role, when(m.InviteExpires))
			p.csrf(csrf)
			p.f(`<input type="hidden" name="merchant" value="%s"><button type="submit" aria-label="Accept: %s">Accept</button></form></li>`, m.MerchantID, merchantLabel(m))
		}
		p.raw(`</ul>`)
	}
	if len(unproven) > 0 {
		p.raw(`<h2>Memberships to link</h2><p>You used a separate password for these merchants. Enter the one each knew to link it to your sign-in, or ask its administrator for a new invitation.</p>`)
		for _, m := range unproven {
			p.raw(`<form method="post" action="/dashboard/merchants/link" class="narrow link-membership">`)
			p.csrf(csrf)
			p.f(`<input type="hidden" name="merchant" value="%s"><label for="link-%s">Password you used for %s</label>
<input id="link-%s" name="password" type="password" autocomplete="off" required>
<button type="submit">Link %s</button></form>`, m.MerchantID, m.MerchantID, merchantLabel(m), m.MerchantID, merchantLabel(m))
		}
	}
}

func viewTOTP(p *pw, d map[string]any) {
	p.raw(`<h1>Two-factor sign-in</h1><form method="post" action="/dashboard/totp" class="narrow">`)
	p.csrf(str(d, "PendingCSRF"))
	p.raw(`<label for="code">Code from your authenticator app</label>
<input id="code" name="code" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" autocomplete="one-time-code" required>
<button type="submit">Verify</button></form>`)
}

func viewSetPassword(p *pw, d map[string]any) {
	if m := str(d, "Merchant"); m != "" {
		p.f(`<h1>Invitation</h1><p>For <strong>%s</strong>: join <strong>%s</strong> as %s. This link works once.</p>`, str(d, "Email"), m, str(d, "Role"))
	} else {
		p.f(`<h1>Set your password</h1><p>For <strong>%s</strong>. This link works once.</p>`, str(d, "Email"))
	}
	if signIn := str(d, "SignIn"); signIn != "" {
		// A person with a sign-in accepts signed in: no new password.
		if tok := str(d, "AcceptCSRF"); tok != "" {
			p.raw(`<form method="post" action="/dashboard/merchants/accept" class="narrow">`)
			p.csrf(tok)
			p.f(`<input type="hidden" name="merchant" value="%s"><button type="submit" id="accept">Accept the invitation</button></form>`, str(d, "MerchantID"))
		} else {
			p.f(`<p>This address already signs in to the dashboard. <a href="%s" id="sign-in-to-accept">Sign in</a> with your password: the invitation waits on your list of merchants.</p>`, signIn)
		}
		return
	}
	min := d["Min"].(int)
	p.f(`<form method="post" action="/dashboard/set-password" class="narrow">
<input type="hidden" name="token" value="%s">
<input type="hidden" name="username" value="%s" autocomplete="username">
<label for="password">New password (at least %s characters)</label>
<input id="password" name="password" type="password" autocomplete="new-password" minlength="%s" required>
<label for="confirm">Repeat the password</label>
<input id="confirm" name="confirm" type="password" autocomplete="new-password" minlength="%s" required>
<button type="submit">Set password</button></form>
<p class="hint">One password for every merchant you work for.</p>`, str(d, "Token"), str(d, "Email"), min, min, min)
}

func viewError(p *pw, d map[string]any) {
	p.f(`<h1>Sorry</h1><p class="error" role="alert">%s</p><p><a href="/dashboard">Back to the dashboard</a></p>`, str(d, "Message"))
}

func viewProfile(p *pw, d map[string]any) {
	m := d["M"].(*merchant.Merchant)
	admin, csrf := flag(d, "Admin"), str(d, "CSRF")
	dis := attrIf(!admin, " disabled")
	mode := "live"
	if m.Sandbox {
		mode = "sandbox"
	}
	p.f(`<h1>Profile</h1>
<section aria-labelledby="h-merchant"><h2 id="h-merchant">Merchant</h2><dl class="facts">
<dt>Merchant id</dt><dd><code id="merchant-id">%s</code></dd><dt>Name</dt><dd>%s</dd><dt>Mode</dt><dd>%s</dd></dl></section>
<section aria-labelledby="h-settings"><h2 id="h-settings">Notifications and checkout</h2>
<form method="post" action="%s" id="settings">`, m.ID, m.Name, mode, p.at("/profile"))
	p.csrf(csrf)
	format := str(d, "Format")
	p.f(`<label for="notifyUrl">Notify URL</label><input id="notifyUrl" name="notifyUrl" type="url" value="%s"%s>
<fieldset><legend>Notification format</legend>
<label class="inline"><input type="radio" name="notificationFormat" value="form"%s%s> Form (spec default)</label>
<label class="inline"><input type="radio" name="notificationFormat" value="json"%s%s> JSON</label></fieldset>
<label for="allowedOrigins">Allowed checkout origins (one a line)</label>
<textarea id="allowedOrigins" name="allowedOrigins" rows="3"%s>%s</textarea>
<label for="successUrl">Default success URL</label><input id="successUrl" name="successUrl" type="url" value="%s"%s>
<label for="failureUrl">Default failure URL</label><input id="failureUrl" name="failureUrl" type="url" value="%s"%s>`,
		m.NotifyURL, dis, attrIf(format == "form", " checked"), dis, attrIf(format == "json", " checked"), dis,
		dis, str(d, "Origins"), m.SuccessURL, dis, m.FailureURL, dis)
	if admin {
		p.raw(`<button type="submit">Save settings</button>`)
	}
	p.raw("</form></section>\n")

	viewMethods(p, m)

	now, _ := d["Now"].(time.Time)
	p.f(`<section aria-labelledby="h-key"><h2 id="h-key">API key</h2><p>Current key: <code id="key-prefix">%s…</code></p>`, m.APIKeyPrefix)
	if k := str(d, "NewKey"); k != "" {
		p.f(`<div class="secret" role="status"><p><strong>New API key, shown only now.</strong> Store it in your secret manager.</p>
<p><code id="new-api-key">%s</code></p>`, k)
		if o, _ := d["Overlap"].(time.Duration); o > 0 {
			p.f(`<p id="old-key-grace">The old key <code>%s…</code> keeps working until %s (%s): move your servers to the new key before then.</p></div>`,
				str(d, "OldPrefix"), when(d["OldKeyUntil"].(time.Time)), lifetime(o))
		} else {
			p.f(`<p id="old-key-grace">The old key <code>%s…</code> is refused from now on, except by API instances that used it in the last %s: they cache keys and accept it until %s at the latest. Switch to the new key now.</p></div>`,
				str(d, "OldPrefix"), lifetime(apikey.DefaultTTL), when(d["OldKeyUntil"].(time.Time)))
		}
	}
	if m.PreviousAPIKeyLive(now) {
		p.f(`<p id="previous-key">Previous key: <code>%s…</code>, works until <span id="previous-key-until">%s</span>.</p>`, m.PrevAPIKeyPrefix, when(m.PrevAPIKeyUntil))
		if admin {
			p.f(`<form method="post" action="%s" class="row">`, p.at("/profile/api-key"))
			p.csrf(csrf)
			p.raw(`<button type="submit" name="action" value="end-previous" id="end-previous-key" data-confirm="End the previous API key now? Calls with it fail from now on (within 30 seconds where an API instance had just used it).">End the previous key now</button></form>`)
		}
	}
	if admin {
		p.f(`<form method="post" action="%s" class="row">`, p.at("/profile/api-key"))
		p.csrf(csrf)
		overlapSelect(p, "key-overlap", "The old key keeps working")
		p.raw(`<button type="submit" id="rotate-key" data-confirm="Rotate the API key? The new key is shown once; the old one works for the time you chose (a previous key still working ends now).">Rotate API key</button></form>`)
	}
	p.raw("</section>\n")

	p.raw(`<section aria-labelledby="h-webhook"><h2 id="h-webhook">Webhook secret</h2><p>Signs the Standard Webhooks headers and JSON notifications.</p>`)
	if sec := str(d, "Secret"); sec != "" {
		p.f(`<p><code id="webhook-secret">%s</code></p>`, sec)
	}
	if _, ok := m.PreviousWebhookSecret(now); ok {
		p.f(`<p id="previous-secret">The previous secret signs notifications too (a second <code>webhook-signature</code> entry) until <span id="previous-secret-until">%s</span>.</p>`, when(m.PrevSecretUntil))
		if admin {
			p.f(`<form method="post" action="%s" class="row">`, p.at("/profile/webhook-secret"))
			p.csrf(csrf)
			p.raw(`<button type="submit" name="action" value="end-previous" id="end-previous-secret">Stop signing with the previous secret</button></form>`)
		}
	}
	if admin {
		p.f(`<form method="post" action="%s" class="row">`, p.at("/profile/webhook-secret"))
		p.csrf(csrf)
		p.raw(`<button type="submit" name="action" value="reveal" id="reveal-secret">Reveal</button></form>`)
		p.f(`<form method="post" action="%s" class="row">`, p.at("/profile/webhook-secret"))
		p.csrf(csrf)
		overlapSelect(p, "secret-overlap", "The old secret keeps signing")
		p.raw(`<button type="submit" name="action" value="rotate" id="rotate-secret" data-confirm="Rotate the webhook secret? Notifications carry a signature with the old one too for the time you chose.">Rotate webhook secret</button></form>`)
	}
	p.raw("</section>\n")

	addr := str(d, "SFTPAddress")
	if addr == "" {
		addr = "not configured"
	}
	pwState := "not set"
	if flag(d, "SFTPHasPassword") {
		pwState = "set"
	}
	p.f(`<section aria-labelledby="h-sftp"><h2 id="h-sftp">SFTP (batch files)</h2><dl class="facts">
<dt>Address</dt><dd><code id="sftp-address">%s</code></dd><dt>User</dt><dd><code id="sftp-user">%s</code></dd>
<dt>Password</dt><dd id="sftp-password-state">%s</dd>`, addr, str(d, "SFTPUser"), pwState)
	if until, ok := d["SFTPLockedUntil"].(time.Time); ok {
		p.f(`<dt>Password logins</dt><dd id="sftp-lock" class="error">Locked until %s after %d wrong passwords in a row. SSH key logins still work; setting a new password ends the lock.</dd>`,
			when(until), d["SFTPFailures"])
	} else if n, _ := d["SFTPFailures"].(int); n > 0 {
		p.f(`<dt>Password logins</dt><dd id="sftp-lock">%d wrong passwords since the last login (%d lock the password out for a while).</dd>`, n, lockout.MaxFailures)
	}
	p.raw(`</dl>`)
	if keys, _ := d["SFTPKeys"].([]string); len(keys) > 0 {
		p.raw(`<h3>SSH keys</h3><ul class="keys">`)
		for _, k := range keys {
			p.f(`<li><code>%s</code>`, k)
			if admin {
				p.f(` <form method="post" action="%s" class="inline">`, p.at("/profile/sftp"))
				p.csrf(csrf)
				p.f(`<input type="hidden" name="action" value="remove-key"><input type="hidden" name="key" value="%s"><button type="submit">Remove</button></form>`, k)
			}
			p.raw("</li>")
		}
		p.raw("</ul>")
	}
	if admin {
		p.f(`<form method="post" action="%s">`, p.at("/profile/sftp"))
		p.csrf(csrf)
		p.f(`<input type="hidden" name="action" value="password"><input type="hidden" name="username" value="%s" autocomplete="username">
<label for="sftp-password">New SFTP password</label>
<input id="sftp-password" name="password" type="password" autocomplete="new-password" minlength="%s" required>
<button type="submit" id="set-sftp-password">Set SFTP password</button></form>`, str(d, "SFTPUser"), MinPasswordLen)
		p.f(`<form method="post" action="%s">`, p.at("/profile/sftp"))
		p.csrf(csrf)
		p.raw(`<input type="hidden" name="action" value="add-key">
<label for="sftp-key">Add an SSH public key (authorized_keys line)</label>
<textarea id="sftp-key" name="key" rows="2" required></textarea>
<button type="submit">Add key</button></form>`)
	}
	p.raw("</section>\n")
}

func viewAccount(p *pw, d map[string]any) {
	id := d["Identity"].(*dashuser.Identity)
	csrf := str(d, "CSRF")
	p.f(`<h1>Account</h1><p>Signed in as <strong id="account-email">%s</strong>: one password and one second factor for every merchant you work for.</p>`, id.Email)
	if ms, _ := d["Memberships"].([]*dashuser.Membership); len(ms) > 0 {
		p.raw(`<h2>Your merchants</h2><ul id="account-merchants">`)
		for _, m := range ms {
			p.f(`<li><a href="%s">%s</a> · %s</li>`, MerchantPath(m.MerchantID, "/overview"), merchantLabel(m), m.Role)
		}
		p.raw(`</ul>`)
	}
	if m := str(d, "Message"); m != "" {
		p.f(`<p class="notice" role="status">%s</p>`, m)
	}
	p.raw(`<section aria-labelledby="h-totp"><h2 id="h-totp">Two-factor sign-in (TOTP)</h2>`)
	confirm := func() {
		p.f(`<input type="hidden" name="username" value="%s" autocomplete="username">
<label for="%s-password">Password</label><input id="%s-password" name="password" type="password" autocomplete="current-password" required>
<label for="%s-current">Code from your current authenticator</label><input id="%s-current" name="current" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" autocomplete="one-time-code" required>`,
			id.Email, "off", "off", "off", "off")
	}
	if flag(d, "TOTPOn") {
		p.raw(`<p>On. To turn it off or move it to another app, confirm with your password and a current code.</p><form method="post" action="/dashboard/account/totp" class="narrow">`)
		p.csrf(csrf)
		p.raw(`<input type="hidden" name="action" value="disable">`)
		confirm()
		p.raw(`<button type="submit" id="disable-totp">Turn off</button></form><h3>Move to another app</h3>`)
	} else {
		p.raw(`<p>Off.</p>`)
	}
	p.f(`<p>Add this key to your authenticator app, then enter the code it shows (this form works for %s).</p>
<p>Key: <code id="totp-secret">%s</code></p><p class="hint">Or open <code class="wrap" id="totp-uri">%s</code></p>
<form method="post" action="/dashboard/account/totp" class="narrow">`, lifetime(enrolTTL), str(d, "Secret"), str(d, "URI"))
	p.csrf(csrf)
	if flag(d, "TOTPOn") {
		p.f(`<input type="hidden" name="username" value="%s" autocomplete="username">
<label for="re-password">Password</label><input id="re-password" name="password" type="password" autocomplete="current-password" required>
<label for="re-current">Code from your current authenticator</label><input id="re-current" name="current" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" autocomplete="one-time-code" required>`, id.Email)
	}
	p.f(`<input type="hidden" name="sealed" value="%s"><label for="code">Code from the new key</label>
<input id="code" name="code" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" autocomplete="one-time-code" required>
<button type="submit" id="enable-totp">%s</button></form>`, str(d, "Sealed"), map[bool]string{true: "Replace", false: "Turn on"}[flag(d, "TOTPOn")])
	p.raw("</section>")
}

// overlapSelect offers a rotation's overlaps (merchant.Overlaps).
func overlapSelect(p *pw, id, label string) {
	p.f(`<div><label for="%s">%s</label><select id="%s" name="overlap">`, id, label, id)
	for _, o := range merchant.Overlaps {
		v, l := o.String(), "not at all: it stops now"
		if o == 0 {
			v = "none"
		} else {
			l = "for " + lifetime(o)
		}
		p.f(`<option value="%s"%s>%s</option>`, v, attrIf(o == time.Hour, " selected"), l)
	}
	p.raw(`</select></div>`)
}

func viewPayments(p *pw, d map[string]any) {
	f := d["F"].(map[string]string)
	p.f(`<h1>Payments</h1><form method="get" action="%s" class="filters">`, p.at("/payments"))
	p.raw(`
<div><label for="status">Status</label><select id="status" name="status"><option value="">any</option>`)
	for _, o := range []struct{ v, l string }{{"1", "paid"}, {"2", "unpaid"}, {"3", "cancelled"}} {
		if f["status"] == o.v {
			p.f(`<option value="%s" selected>%s</option>`, o.v, o.l)
		} else {
			p.f(`<option value="%s">%s</option>`, o.v, o.l)
		}
	}
	p.f(`</select></div>
<div><label for="from">From</label><input id="from" name="from" type="date" value="%s"></div>
<div><label for="to">To</label><input id="to" name="to" type="date" value="%s"></div>
<div><label for="ref">Reference</label><input id="ref" name="ref" value="%s"></div>
<div><button type="submit" id="filter">Filter</button></div></form>
<p><a href="%s" id="export">Export CSV</a></p>
<div class="scroll" tabindex="0" role="region" aria-label="Payment requests"><table id="payments"><caption>Payment requests, newest first</caption>
<thead><tr><th scope="col">Id</th><th scope="col">Created</th><th scope="col">Amount</th><th scope="col">Reference</th><th scope="col">Status</th><th scope="col">Last attempt</th></tr></thead><tbody>`,
		f["from"], f["to"], f["ref"], str(d, "Export"))
	rows := d["Rows"].([]paymentRow)
	for _, r := range rows {
		p.f(`<tr><td><a href="%s">%s</a></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`,
			p.at("/payments/"+strconv.FormatInt(r.ID, 10)), r.ID, when(r.CreatedAt), money(r.Amount, r.Unit), r.ReferenceID, r.StatusName, lastResult(r))
	}
	if len(rows) == 0 {
		p.raw(`<tr><td colspan="6">No payment requests match.</td></tr>`)
	}
	p.raw(`</tbody></table></div><p class="row">`)
	if flag(d, "First") {
		p.f(`<a href="%s">First page</a> `, p.at("/payments"))
	}
	if n := str(d, "Next"); n != "" {
		p.f(`<a href="%s" id="next-page">Next page</a>`, n)
	}
	p.raw("</p>")
}

func viewPayment(p *pw, d map[string]any) {
	r := d["P"].(paymentRow)
	p.f(`<h1>Payment request <span id="request-id">%s</span></h1><dl class="facts">
<dt>Status</dt><dd id="request-status">%s</dd><dt>Amount</dt><dd>%s</dd><dt>Reference</dt><dd>%s</dd><dt>Created</dt><dd>%s</dd>`,
		r.ID, r.StatusName, money(r.Amount, r.Unit), r.ReferenceID, when(r.CreatedAt))
	if l := r.LastLog; l != nil {
		p.f(`<dt>Last attempt</dt><dd id="last-result">%s</dd>`, resultWords(l.TransactionStatusID, l.Code, l.Message))
	}
	p.raw(`</dl>`)
	if l := r.LastLog; l != nil {
		// The wire form, for developers: what the API and notifications carry.
		p.f(`<details class="raw"><summary>lastLog as the API returns it</summary><pre><code id="last-log">transactionStatusId %s, code "%s", message "%s"</code></pre></details>`,
			int(l.TransactionStatusID), l.Code, l.Message)
	}
	p.raw(`<h2>Attempts</h2><div class="scroll" tabindex="0" role="region" aria-label="Attempts"><table id="transactions">
<thead><tr><th scope="col">When</th><th scope="col">Result</th><th scope="col">Method</th><th scope="col">Connector</th><th scope="col">3-D Secure</th><th scope="col">Amount</th><th scope="col">Refund</th><th scope="col">Transaction</th></tr></thead><tbody>`)
	txs := d["Txs"].([]txRow)
	for _, t := range txs {
		at := t.CreatedAt
		if t.SettledAt != nil {
			at = *t.SettledAt
		}
		conn := t.Connector
		if conn == "" {
			conn = "—" // written before connectors were recorded
		}
		p.f(`<tr><td>%s</td><td class="result">%s</td><td class="method">%s</td><td class="connector">%s</td><td class="threeds">%s</td><td>%s</td><td>`,
			when(at), resultWords(t.Status, t.Code, t.Message), methodWords(t.Transaction), conn, threeDSWords(t.Transaction), money(t.Amount, t.Unit))
		switch {
		case t.RefundInfo != "":
			p.f(`<span class="refund-status">%s</span>`, t.RefundInfo)
		case t.Refundable && flag(d, "Admin"):
			p.f(`<a href="%s" class="refund-link">Refund…</a>`, p.at(fmt.Sprintf("/payments/%d/refund?tx=%d", r.ID, t.ID)))
		}
		p.f(`</td><td><code>%s</code><br><span class="hint">%s</span></td></tr>`, t.ID, t.Number)
		if t.After != nil && t.After.Dispute != nil {
			dp := t.After.Dispute
			due := "no evidence asked for"
			if !dp.EvidenceDueBy.IsZero() {
				due = "evidence due " + dp.EvidenceDueBy.UTC().Format("2006-01-02 15:04") + " UTC"
			}
			p.f(`<tr class="dispute"><td colspan="8">Disputed: <strong class="dispute-status">%s</strong> (%s, %s), %s. <a href="%s" rel="noopener noreferrer" target="_blank">Respond in Stripe's Dashboard</a></td></tr>`,
				dp.Status, dp.Reason, money(dp.Amount, dp.Unit), due, dp.DashboardURL())
		}
		if t.After != nil && t.After.LateCharge != nil {
			l := t.After.LateCharge
			p.f(`<tr class="late-charge"><td colspan="8">A charge of %s succeeded after this attempt was declined; it was returned (%s).</td></tr>`, money(l.Amount, l.Unit), l.Status)
		}
	}
	if len(txs) == 0 {
		p.raw(`<tr><td colspan="8">No attempt yet.</td></tr>`)
	}
	p.raw(`</tbody></table></div><h2>Notification attempts</h2><div class="scroll" tabindex="0" role="region" aria-label="Notification attempts"><table id="deliveries">
<thead><tr><th scope="col">Event</th><th scope="col">Attempt</th><th scope="col">At</th><th scope="col">URL</th><th scope="col">Response</th><th scope="col">Outcome</th><th scope="col">Next attempt</th></tr></thead><tbody>`)
	dl := d["Deliveries"].([]Delivery)
	for _, a := range dl {
		resp := a.Error
		if a.StatusCode != 0 {
			resp = strconv.Itoa(a.StatusCode)
		}
		p.f(`<tr><td><code>%s</code></td><td>%s</td><td>%s</td><td class="wrap">%s</td><td class="response-code">%s</td><td class="outcome">%s</td><td>%s</td></tr>`,
			a.EventID, a.Attempt, when(a.At), a.URL, resp, a.Outcome, when(a.NextAt))
	}
	if len(dl) == 0 {
		p.raw(`<tr><td colspan="7">No notification attempt yet.</td></tr>`)
	}
	p.raw("</tbody></table></div>")
	if flag(d, "Notifiable") {
		p.f(`<form method="post" action="%s">`, p.at(fmt.Sprintf("/payments/%d/redeliver", r.ID)))
		p.csrf(str(d, "CSRF"))
		p.raw(`<button type="submit" id="redeliver">Send the notification again</button></form>`)
	}
	p.f(`<p><a href="%s">All payments</a></p>`, p.at("/payments"))
}

func viewRefund(p *pw, d map[string]any) {
	r := d["P"].(*payment.Request)
	t := d["T"].(*payment.Transaction)
	p.f(`<h1>Refund transaction %s</h1><p>Payment request %s: refund <strong>%s</strong> to the payer. This cannot be undone.</p>
<form method="post" action="%s" class="narrow">`, t.ID, r.ID, money(t.Amount, t.Unit), p.at(fmt.Sprintf("/payments/%d/refund", r.ID)))
	p.csrf(str(d, "CSRF"))
	p.f(`<input type="hidden" name="tx" value="%s">
<label class="inline"><input type="checkbox" name="confirm" value="yes" id="confirm" required> I want to refund %s</label>
<button type="submit" id="do-refund">Refund</button></form><p><a href="%s">Cancel</a></p>`, t.ID, money(t.Amount, t.Unit), p.at(fmt.Sprintf("/payments/%d", r.ID)))
}

func viewBatches(p *pw, d map[string]any) {
	bs := d["Batches"].([]Batch)
	running := false
	for _, b := range bs {
		running = running || b.Running()
	}
	// dashboard.js fetches this page again every few seconds while a file
	// runs and swaps this block in: progress without reloading.
	p.f(`<h1>Batch files</h1><div id="batches-live" data-live-refresh%s><div class="scroll" tabindex="0" role="region" aria-label="Batch files"><table id="batches"><caption>Files uploaded over SFTP</caption>
<thead><tr><th scope="col">File</th><th scope="col">Received</th><th scope="col">State</th><th scope="col">Progress</th><th scope="col">Rows</th><th scope="col">Approved</th><th scope="col">Declined</th><th scope="col">Pending</th><th scope="col">Rejected</th><th scope="col">Duplicate</th><th scope="col">Result</th></tr></thead><tbody>`,
		markup(attrIf(running, ` data-running=""`)))
	for _, b := range bs {
		p.f(`<tr data-file="%s"><td>%s</td><td>%s</td><td class="state">%s</td><td class="progress-cell">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>`,
			b.File, b.File, when(b.ReceivedAt), b.State, batchProgress(b), count(int64(b.Rows)), count(int64(b.Approved)), count(int64(b.Declined)),
			count(int64(b.Pending)), count(int64(b.Rejected)), count(int64(b.Duplicate)))
		if b.ResultKey != "" {
			p.f(`<a href="%s">%s</a>`, p.at("/batches/result?file="+url.QueryEscape(b.ResultKey)), b.ResultKey)
		}
		p.raw("</td></tr>")
	}
	if len(bs) == 0 {
		p.raw(`<tr><td colspan="11">No batch file yet.</td></tr>`)
	}
	p.raw("</tbody></table></div></div>")
}

// batchProgress is a file's progress bar with lines done of total and the
// estimated finish.
func batchProgress(b Batch) markup {
	if b.LinesTotal <= 0 {
		if b.Running() {
			return markup(`<span class="hint">reading the file…</span>`)
		}
		return ""
	}
	var p pw
	p.f(`<progress class="lines" max="%s" value="%s" aria-label="Lines done of %s"></progress><span class="lines-text">%s of %s lines</span>`,
		b.LinesTotal, b.LinesDone, b.File, count(b.LinesDone), count(b.LinesTotal))
	if t := b.Finish(); !t.IsZero() {
		p.f(`<span class="hint eta">done at about %s</span>`, t.UTC().Format("15:04:05 UTC"))
	}
	return markup(p.b.String())
}

func viewUsers(p *pw, d map[string]any) {
	p.raw(`<h1>Users</h1>`)
	if to := str(d, "SentTo"); to != "" {
		// The link went to the invitee only: this page never holds it.
		until, _ := d["SentUntil"].(time.Time)
		p.f(`<p class="notice" role="status" id="invite-sent">Invitation sent to <span class="wrap">%s</span>, valid until <span id="invite-until">%s</span> (%s).</p>`,
			to, when(until), lifetime(InviteTTL))
	}
	now, _ := d["Now"].(time.Time)
	csrf := str(d, "CSRF")
	p.raw(`<ul id="users">`)
	for _, m := range d["Members"].([]*dashuser.Membership) {
		state := ""
		switch {
		case m.State == dashuser.StateInvited && m.Pending(now):
			state = ", invited until " + when(m.InviteExpires)
		case m.State == dashuser.StateInvited:
			state = ", invitation lapsed"
		case m.State == dashuser.StateUnproven:
			state = ", awaiting the password this merchant knew (or a new invitation)"
		}
		other := map[string]string{dashuser.RoleAdmin: dashuser.RoleMember, dashuser.RoleMember: dashuser.RoleAdmin}[m.Role]
		p.f(`<li data-state="%s"><span class="user">%s (%s%s)</span> <form method="post" action="%s" class="inline">`, m.State, m.Email, m.Role, state, p.at("/users/role"))
		p.csrf(csrf)
		p.f(`<input type="hidden" name="email" value="%s"><button type="submit" name="role" value="%s" aria-label="Make %s: %s">Make %s</button></form>`,
			m.Email, other, other, m.Email, other)
		if m.State == dashuser.StateInvited {
			// Invites again: a new link e-mailed, the earlier one void.
			p.f(` <form method="post" action="%s" class="inline">`, p.at("/users"))
			p.csrf(csrf)
			p.f(`<input type="hidden" name="email" value="%s"><input type="hidden" name="role" value="%s"><button type="submit" class="resend" aria-label="Send again: %s">Send again</button></form>`,
				m.Email, m.Role, m.Email)
		}
		p.f(` <form method="post" action="%s" class="inline">`, p.at("/users/remove"))
		p.csrf(csrf)
		p.f(`<input type="hidden" name="email" value="%s"><button type="submit" aria-label="Remove: %s" data-confirm="Remove %s from this merchant? Their access to it ends at once; their other merchants are not affected.">Remove</button></form></li>`,
			m.Email, m.Email, m.Email)
	}
	p.f(`</ul><h2>Invite a person</h2><form method="post" action="%s" class="narrow">`, p.at("/users"))
	p.csrf(csrf)
	p.raw(`<label for="email">E-mail</label><input id="email" name="email" type="email" required>
<label for="role">Role</label><select id="role" name="role"><option value="member">member (read, redeliver)</option><option value="admin">admin (settings, keys, users, refunds)</option></select>`)
	p.f(`<p class="hint">The invitation goes by e-mail to the address only, with a one-time link that works for %s.</p>
<button type="submit" id="invite">Send invitation</button></form>`, lifetime(InviteTTL))
}

func viewAudit(p *pw, d map[string]any) {
	p.raw(`<h1>Audit log</h1><div class="scroll" tabindex="0" role="region" aria-label="Audit log"><table id="audit"><caption>Changes to settings, keys and users, newest first</caption>
<thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th><th scope="col">Detail</th></tr></thead><tbody>`)
	es := d["Entries"].([]dashuser.AuditEntry)
	for _, e := range es {
		p.f(`<tr><td>%s</td><td>%s</td><td class="action">%s</td><td class="wrap">%s</td></tr>`, when(e.At), e.Actor, e.Action, e.Detail)
	}
	if len(es) == 0 {
		p.raw(`<tr><td colspan="4">No change recorded yet.</td></tr>`)
	}
	p.raw("</tbody></table></div>")
}

// viewMethods lists the host-to-host method selectors the merchant has, by
// the spec's method kinds; operators change them (payctl merchant update
// --methods), so the page only shows them.
func viewMethods(p *pw, m *merchant.Merchant) {
	p.raw(`<section aria-labelledby="h-methods"><h2 id="h-methods">Payment methods</h2><dl class="facts" id="methods">`)
	groups := []struct {
		name string
		sel  []int
	}{{"Wallet A (Google Pay)", merchant.WalletASelectors}, {"Wallet B (Apple Pay)", merchant.WalletBSelectors},
		{"UPI", merchant.UPISelectors}, {"Alternative methods", merchant.AlternativeSelectors}}
	if m.Sandbox {
		groups = append(groups, struct {
			name string
			sel  []int
		}{"Test selector", []int{merchant.SandboxSelector}})
	}
	for _, g := range groups {
		var on []string
		for _, n := range g.sel {
			if slices.Contains(m.Methods, n) {
				on = append(on, strconv.Itoa(n))
			}
		}
		enabled := "not enabled"
		if len(on) > 0 {
			enabled = "selectors " + strings.Join(on, ", ")
		}
		p.f(`<dt>%s</dt><dd>%s</dd>`, g.name, enabled)
	}
	p.raw(`</dl><p class="hint">Cards and the hosted page's methods follow these and your currency. To change them, ask your account manager.</p></section>
`)
}

// lastResult is the list's "Last attempt": the request's lastLog in words.
func lastResult(r paymentRow) string {
	if l := r.LastLog; l != nil {
		return resultWords(l.TransactionStatusID, l.Code, l.Message)
	}
	return r.TxStatus
}
