package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
)

// Connectors are a merchant's own acquirer accounts
// (acquireraccount.Service): the page lists them and changes them only
// through this, which checks credentials with a harmless call, seals
// secrets and writes every change together with its audit entry.
type Connectors interface {
	// List returns the merchant's accounts by name, secrets sealed.
	List(ctx context.Context, merchantID string) ([]*acquireraccount.Account, error)
	// Add validates in, checks it and saves it: errkind.Invalid (code 046)
	// when a field is wrong or the acquirer refused the check,
	// errkind.Exists when the name is taken.
	Add(ctx context.Context, actor string, in acquireraccount.Input) (*acquireraccount.Account, error)
	// Test checks a saved account again: errkind.Invalid (046) when the
	// acquirer refused, NotFound when there is no such account.
	Test(ctx context.Context, actor, merchantID, name string) (*acquireraccount.Account, error)
	// SetStatus disables or enables an account (no change, no entry, when
	// it has that status already).
	SetStatus(ctx context.Context, actor, merchantID, name string, st acquireraccount.Status) (*acquireraccount.Account, error)
}

// fieldLabels name the accounts' fields on the page.
var fieldLabels = map[string]string{
	acquireraccount.StripeSecretKey:      "Secret key",
	acquireraccount.StripeWebhookSecret:  "Webhook signing secret",
	acquireraccount.AdyenAPIKey:          "API key",
	acquireraccount.AdyenHMACKey:         "HMAC key",
	acquireraccount.AdyenMerchantAccount: "Merchant account",
	acquireraccount.AdyenEnvironment:     "Environment",
	acquireraccount.AdyenLivePrefix:      "Live URL prefix",
	"name":                               "Name",
	"kind":                               "Acquirer",
	"status":                             "Status",
}

func fieldLabel(f string) string {
	if l, ok := fieldLabels[f]; ok {
		return l
	}
	return f
}

var kindNames = map[acquireraccount.Kind]string{acquireraccount.Stripe: "Stripe", acquireraccount.Adyen: "Adyen"}

func kindName(k acquireraccount.Kind) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return string(k)
}

func (h *handler) connectorService() (Connectors, error) {
	if h.Connectors == nil {
		return nil, refuse(errkind.Unavailable, "Connecting your own acquirer accounts is not available here.")
	}
	return h.Connectors, nil
}

func (h *handler) connectors(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	return h.renderConnectors(w, r, s, http.StatusOK, map[string]any{})
}

func (h *handler) renderConnectors(w http.ResponseWriter, r *http.Request, s *dashuser.Session, status int, data map[string]any) error {
	svc, err := h.connectorService()
	if err != nil {
		return err
	}
	list, err := svc.List(r.Context(), s.MerchantID)
	if err != nil {
		return err
	}
	m, err := h.merchantOf(r, s)
	if err != nil {
		return err
	}
	data["Accounts"] = list
	data["Sandbox"] = m.Sandbox
	base := h.PublicBaseURL
	if base == "" {
		base = "https://" + r.Host
	}
	data["APIBase"] = strings.TrimSuffix(base, "/")
	h.render(w, r, status, "connectors", s, data)
	return nil
}

// addConnector connects an account from the form of its kind. The secrets
// typed live in this request only: a refused form comes back with the
// settings kept and every secret field empty, and no message carries a
// secret (scrub).
func (h *handler) addConnector(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	svc, err := h.connectorService()
	if err != nil {
		return err
	}
	kind := acquireraccount.Kind(r.PostFormValue("kind"))
	fs := acquireraccount.Fields(kind)
	if len(fs) == 0 {
		return refuse(errkind.Invalid, "Choose Stripe or Adyen.")
	}
	in := acquireraccount.Input{MerchantID: s.MerchantID, Name: strings.TrimSpace(r.PostFormValue("name")), Kind: kind, Values: map[string]string{}}
	kept := map[string]string{"name": in.Name}
	var secrets []string
	for _, f := range fs {
		v := strings.TrimSpace(r.PostFormValue(f.Name))
		if v == "" {
			continue
		}
		in.Values[f.Name] = v
		if f.Secret {
			secrets = append(secrets, v)
		} else {
			kept[f.Name] = v
		}
	}
	a, err := svc.Add(r.Context(), s.Email, in)
	if err != nil {
		return h.connectorRefused(w, r, s, err, secrets, map[string]any{"Kind": string(kind), "Kept": kept})
	}
	return h.renderConnectors(w, r, s, http.StatusOK, map[string]any{"Notice": fmt.Sprintf(
		"%s account %s connected: its credentials passed the check. Its secrets are stored sealed and not shown again.", kindName(a.Kind), a.Name)})
}

func (h *handler) testConnector(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	svc, err := h.connectorService()
	if err != nil {
		return err
	}
	a, err := svc.Test(r.Context(), s.Email, s.MerchantID, r.PostFormValue("name"))
	if err != nil {
		return h.connectorRefused(w, r, s, err, nil, map[string]any{})
	}
	return h.renderConnectors(w, r, s, http.StatusOK, map[string]any{"Notice": fmt.Sprintf(
		"%s account %s passed the check at %s.", kindName(a.Kind), a.Name, when(a.CheckedAt))})
}

func (h *handler) connectorStatus(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	svc, err := h.connectorService()
	if err != nil {
		return err
	}
	var st acquireraccount.Status
	switch r.PostFormValue("action") {
	case "disable":
		st = acquireraccount.Disabled
	case "enable":
		st = acquireraccount.Active
	default:
		return refuse(errkind.Invalid, "Unknown action.")
	}
	a, err := svc.SetStatus(r.Context(), s.Email, s.MerchantID, r.PostFormValue("name"), st)
	if err != nil {
		return h.connectorRefused(w, r, s, err, nil, map[string]any{})
	}
	notice := fmt.Sprintf("Account %s is disabled: no payment is routed to it; its payments keep it for refunds and lookups.", a.Name)
	if a.Status == acquireraccount.Active {
		notice = fmt.Sprintf("Account %s is active: routing rules may send payments to it.", a.Name)
	}
	return h.renderConnectors(w, r, s, http.StatusOK, map[string]any{"Notice": notice})
}

// connectorRefused shows why the service refused a change, with the
// page: a wrong field or a refused check (400, with the spec's code), a
// taken name or a concurrent change (409), an unknown account (404).
// Anything else is a failure of the service (the error page's 500).
func (h *handler) connectorRefused(w http.ResponseWriter, r *http.Request, s *dashuser.Session, err error, secrets []string, data map[string]any) error {
	e, ok := errkind.As(err)
	if !ok || httpapi.Status(e) >= http.StatusInternalServerError {
		return err
	}
	code := e.Code
	if code == "" && e.Kind == errkind.Invalid {
		code = codes.InvalidPaymentProvider
	}
	var msg string
	switch e.Kind {
	case errkind.Invalid:
		msg = "The account was not saved: " + lowerFirst(e.Detail)
		if len(e.Fields) > 0 {
			msg = "The account was not saved: check the fields below."
			var fe []string
			for _, f := range e.Fields {
				fe = append(fe, fieldLabel(f.Field)+": "+scrub(f.Detail, secrets))
			}
			data["FieldErrors"] = fe
		}
		if data["Kind"] == nil {
			msg = "The check failed: " + lowerFirst(e.Detail)
		}
	case errkind.Exists:
		msg = "An account of that name exists already: choose another name."
	case errkind.Conflict:
		msg = "The account changed meanwhile. Reload the page and try again."
	case errkind.NotFound:
		return errNotFound
	default:
		msg = e.Detail
	}
	if code != "" {
		msg += " (" + string(code) + ")"
	}
	data["Error"] = scrub(msg, secrets)
	data["ErrorCode"] = string(code)
	return h.renderConnectors(w, r, s, httpapi.Status(e), data)
}

// scrub replaces every secret of the form in msg by its mask: an
// acquirer's answer may quote what it was sent.
func scrub(msg string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, acquireraccount.Mask(v))
		}
	}
	return msg
}

// viewConnectors lists the merchant's own accounts (masks only) and, for
// an admin, their actions and the forms that connect new ones.
func viewConnectors(p *pw, d map[string]any) {
	admin, csrf := flag(d, "Admin"), str(d, "CSRF")
	accounts, _ := d["Accounts"].([]*acquireraccount.Account)
	p.raw(`<h1>Connectors</h1><p>Your own Stripe or Adyen accounts. Payments go through the platform's accounts unless your routing rules name one of these.</p>`)
	if fe, _ := d["FieldErrors"].([]string); len(fe) > 0 {
		p.raw(`<ul class="error field-errors" id="field-errors">`)
		for _, e := range fe {
			p.f(`<li>%s</li>`, e)
		}
		p.raw(`</ul>`)
	}
	p.raw(`<div class="scroll" tabindex="0" role="region" aria-label="Your acquirer accounts"><table id="connector-accounts"><caption>Your acquirer accounts</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Acquirer</th><th scope="col">Mode</th><th scope="col">Status</th><th scope="col">Last check passed</th><th scope="col">Credentials</th>`)
	if admin {
		p.raw(`<th scope="col">Actions</th>`)
	}
	p.raw(`</tr></thead><tbody>`)
	for _, a := range accounts {
		mode := "test"
		if a.Live {
			mode = "live"
		}
		p.f(`<tr data-name="%s"><td class="name">%s</td><td class="kind">%s</td><td class="mode">%s</td><td class="status">%s</td><td class="checked">%s</td><td class="credentials"><ul class="plain">`,
			a.Name, a.Name, kindName(a.Kind), mode, a.Status, when(a.CheckedAt))
		for _, f := range acquireraccount.Fields(a.Kind) {
			if v, ok := a.Masks[f.Name]; ok {
				p.f(`<li>%s <code>%s</code></li>`, fieldLabel(f.Name), v)
			} else if v, ok := a.Settings[f.Name]; ok && f.Name != acquireraccount.AdyenEnvironment {
				p.f(`<li>%s <code>%s</code></li>`, fieldLabel(f.Name), v)
			}
		}
		p.raw(`</ul></td>`)
		if admin {
			p.f(`<td class="actions"><form method="post" action="%s" class="inline">`, p.at("/connectors/test"))
			p.csrf(csrf)
			p.f(`<input type="hidden" name="name" value="%s"><button type="submit" class="test" aria-label="Test %s">Test</button></form> `, a.Name, a.Name)
			p.f(`<form method="post" action="%s" class="inline">`, p.at("/connectors/status"))
			p.csrf(csrf)
			if a.Status == acquireraccount.Disabled {
				p.f(`<input type="hidden" name="name" value="%s"><button type="submit" name="action" value="enable" class="enable" aria-label="Enable %s">Enable</button></form></td>`, a.Name, a.Name)
			} else {
				p.f(`<input type="hidden" name="name" value="%s"><button type="submit" name="action" value="disable" class="disable" aria-label="Disable %s" data-confirm="Disable %s? No new payment is routed to it; its payments keep it for refunds and lookups.">Disable</button></form></td>`,
					a.Name, a.Name, a.Name)
			}
		}
		p.raw(`</tr>`)
	}
	if len(accounts) == 0 {
		p.f(`<tr><td colspan="%d">No account of your own yet: payments go through the platform's accounts.</td></tr>`, map[bool]int{true: 7, false: 6}[admin])
	}
	p.raw(`</tbody></table></div>`)
	var hooks []*acquireraccount.Account
	for _, a := range accounts {
		if acquireraccount.WebhookPath(a) != "" {
			hooks = append(hooks, a)
		}
	}
	if len(hooks) > 0 {
		// The address each account's acquirer must send its events to:
		// the merchant registers it in its own account.
		p.raw(`<h2>Webhook addresses</h2><p>Register each address as a webhook endpoint in that account (Stripe Dashboard, Developers, Webhooks), with the signing secret you gave here. Payments routed to the account are settled by its events.</p><ul id="connector-webhooks">`)
		for _, a := range hooks {
			p.f(`<li data-name="%s">%s <code class="webhook-url">%s</code></li>`, a.Name, a.Name, str(d, "APIBase")+acquireraccount.WebhookPath(a))
		}
		p.raw(`</ul>`)
	}
	if !admin {
		p.raw(`<p class="hint">Only the merchant's administrators connect, test and disable accounts.</p>`)
		return
	}
	mode := "test"
	if !flag(d, "Sandbox") {
		mode = "live"
	}
	p.f(`<p class="hint">This merchant takes %s credentials. Saving an account first makes a harmless call with them (Stripe: read the balance; Adyen: list payment methods); a secret is stored sealed and never shown again, only its last four characters.</p>`, mode)
	kept, _ := d["Kept"].(map[string]string)
	formKind := str(d, "Kind")
	for _, kind := range []acquireraccount.Kind{acquireraccount.Stripe, acquireraccount.Adyen} {
		k := string(kind)
		val := func(f string) string {
			if formKind == k {
				return kept[f]
			}
			return ""
		}
		p.f(`<section aria-labelledby="h-add-%s"><h2 id="h-add-%s">Connect a %s account</h2><form method="post" action="%s" class="narrow" id="add-%s">`,
			k, k, kindName(kind), p.at("/connectors"), k)
		p.csrf(csrf)
		p.f(`<input type="hidden" name="kind" value="%s"><label for="%s-name">Name (lower-case letters and digits, for routing rules)</label>
<input id="%s-name" name="name" required maxlength="20" pattern="[a-z][a-z0-9]*" autocomplete="off" value="%s">`, k, k, k, val("name"))
		for _, f := range acquireraccount.Fields(kind) {
			id := k + "-" + f.Name
			label := fieldLabel(f.Name)
			if !f.Required {
				label += " (live accounts only)"
			}
			switch {
			case f.Name == acquireraccount.AdyenEnvironment:
				env := val(f.Name)
				if env == "" {
					env = mode
				}
				p.f(`<label for="%s">%s</label><select id="%s" name="%s"><option value="test"%s>test</option><option value="live"%s>live</option></select>`,
					id, label, id, f.Name, attrIf(env == "test", " selected"), attrIf(env == "live", " selected"))
			case f.Secret:
				// Never filled in again: a refused form asks for the secret anew.
				p.f(`<label for="%s">%s</label><input id="%s" name="%s" type="password" autocomplete="off" spellcheck="false"%s>`,
					id, label, id, f.Name, attrIf(f.Required, " required"))
			default:
				p.f(`<label for="%s">%s</label><input id="%s" name="%s" autocomplete="off" spellcheck="false" value="%s"%s>`,
					id, label, id, f.Name, val(f.Name), attrIf(f.Required, " required"))
			}
		}
		p.f(`<button type="submit" id="add-%s-submit">Check and connect</button></form></section>`, k)
	}
}
