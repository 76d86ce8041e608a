package dashboard

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/sftpuser"
)

// ---- profile ----

func (h *handler) merchantOf(r *http.Request, s *dashuser.Session) (*merchant.Merchant, error) {
	m, err := h.Store.Merchant(r.Context(), s.MerchantID)
	if err != nil && errkind.Is(err, errkind.NotFound) {
		return nil, errNotFound
	}
	return m, err
}

func (h *handler) profile(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	return h.renderProfile(w, r, s, http.StatusOK, map[string]any{})
}

func (h *handler) renderProfile(w http.ResponseWriter, r *http.Request, s *dashuser.Session, status int, data map[string]any) error {
	m, err := h.merchantOf(r, s)
	if err != nil {
		return err
	}
	hasPw, keys, err := h.Ops.SFTP(r.Context(), m.ID)
	if err != nil {
		return err
	}
	// The SFTP user's password attempts (its name is the merchant id).
	tries, err := h.Store.LoginAttempts(r.Context(), sftpuser.AttemptKey(m.ID))
	if err != nil {
		return err
	}
	format := m.NotificationFormat
	if format == "" {
		format = "form"
	}
	data["M"] = m
	data["Now"] = h.Now()
	data["Format"] = format
	data["Origins"] = strings.Join(m.AllowedOrigins, "\n")
	data["SFTPAddress"] = h.SFTPAddress
	data["SFTPUser"] = m.ID
	data["SFTPHasPassword"] = hasPw
	data["SFTPKeys"] = keys
	data["SFTPFailures"] = tries.Failures
	if tries.Locked(h.Now()) {
		data["SFTPLockedUntil"] = tries.LockedUntil
	}
	h.render(w, r, status, "profile", s, data)
	return nil
}

// updateMerchant applies change with optimistic locking, retrying when
// another change (payctl, another admin) landed in between.
func (h *handler) updateMerchant(r *http.Request, s *dashuser.Session, change func(*merchant.Merchant) error) (*merchant.Merchant, error) {
	for range 5 {
		m, err := h.merchantOf(r, s)
		if err != nil {
			return nil, err
		}
		if err := change(m); err != nil {
			return nil, err
		}
		m.UpdatedAt = h.Now().UTC()
		err = h.Store.UpdateMerchant(r.Context(), m)
		if err == nil {
			return m, nil
		}
		if !errkind.Is(err, errkind.Conflict) {
			return nil, err
		}
	}
	return nil, refuse(errkind.Conflict, "The settings changed concurrently too often; try again.")
}

func (h *handler) saveProfile(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	var changed []string
	var invalid error
	_, err := h.updateMerchant(r, s, func(m *merchant.Merchant) error {
		changed = changed[:0]
		set := func(name string, field *string, v string) {
			v = strings.TrimSpace(v)
			if *field != v {
				*field = v
				changed = append(changed, fmt.Sprintf("%s=%q", name, v))
			}
		}
		set("notifyUrl", &m.NotifyURL, r.PostFormValue("notifyUrl"))
		set("successUrl", &m.SuccessURL, r.PostFormValue("successUrl"))
		set("failureUrl", &m.FailureURL, r.PostFormValue("failureUrl"))
		format := r.PostFormValue("notificationFormat")
		if format == "form" && m.NotificationFormat == "" {
			format = ""
		}
		set("notificationFormat", &m.NotificationFormat, format)
		var origins []string
		for _, o := range strings.FieldsFunc(r.PostFormValue("allowedOrigins"), func(c rune) bool { return c == ',' || c == '\n' || c == '\r' || c == ' ' }) {
			n, err := merchant.NormalizeOrigin(o, m.Sandbox)
			if err != nil {
				invalid = fmt.Errorf("Allowed checkout origins: %w", err)
				return invalid
			}
			origins = append(origins, n)
		}
		if strings.Join(origins, ",") != strings.Join(m.AllowedOrigins, ",") {
			m.AllowedOrigins = origins
			changed = append(changed, "allowedOrigins="+strings.Join(origins, ","))
		}
		if err := m.Validate(); err != nil {
			invalid = err
			return err
		}
		return nil
	})
	if invalid != nil {
		return h.renderProfile(w, r, s, http.StatusBadRequest, map[string]any{"Error": strings.TrimPrefix(invalid.Error(), "invalid merchant: ")})
	}
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		h.auditLog(r.Context(), s, "settings.update", strings.Join(changed, ", "))
	}
	return h.renderProfile(w, r, s, http.StatusOK, map[string]any{"Notice": "Settings saved."})
}

// rotateKey replaces the API key, with the overlap the admin chose (none,
// 1 h, 24 h, 7 days): the new key is shown once; the old one keeps working
// until the overlap ends (or is ended early, action end-previous). Without
// an overlap the old one is refused at once by an API instance that looks
// it up, and at the latest after apikey.DefaultTTL by one that had it
// cached; ending an overlap early takes as long.
func (h *handler) rotateKey(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	now := h.Now()
	if r.PostFormValue("action") == "end-previous" {
		var ended string
		if _, err := h.updateMerchant(r, s, func(m *merchant.Merchant) error {
			ended = ""
			if m.PreviousAPIKeyLive(now) {
				ended = m.PrevAPIKeyPrefix
			}
			m.EndPreviousAPIKey()
			return nil
		}); err != nil {
			return err
		}
		if ended == "" {
			return h.renderProfile(w, r, s, http.StatusOK, map[string]any{"Notice": "No previous API key was working."})
		}
		h.auditLog(r.Context(), s, "apikey.end-previous", fmt.Sprintf("previous API key %s… ended early", ended))
		return h.renderProfile(w, r, s, http.StatusOK, map[string]any{"Notice": fmt.Sprintf(
			"The previous key %s… is refused from now on (within %s where an API instance had just used it).", ended, lifetime(apikey.DefaultTTL))})
	}
	overlap, err := merchant.ParseOverlap(r.PostFormValue("overlap"))
	if err != nil {
		return h.renderProfile(w, r, s, http.StatusBadRequest, map[string]any{"Error": "Choose how long the old key keeps working: none, 1 hour, 24 hours or 7 days."})
	}
	var key, oldPrefix string
	m, err := h.updateMerchant(r, s, func(m *merchant.Merchant) error {
		oldPrefix = m.APIKeyPrefix
		if overlap > 0 {
			// The pointer from the old key's hash first: the rotation below
			// is what makes it count.
			if err := h.Store.PutPreviousAPIKey(r.Context(), m.ID, m.APIKeyHash, now.Add(overlap)); err != nil {
				return err
			}
		}
		key = merchant.NewAPIKey(m.Sandbox)
		m.RotateAPIKey(key, h.Sealer.Seal(key, m.ID), overlap, now)
		return nil
	})
	if err != nil {
		return err
	}
	until := now.Add(apikey.DefaultTTL)
	if overlap > 0 {
		until = m.PrevAPIKeyUntil
		h.auditLog(r.Context(), s, "apikey.rotate", fmt.Sprintf("API key %s… replaced by %s…; the old key works until %s (%s overlap)",
			oldPrefix, m.APIKeyPrefix, until.UTC().Format("2006-01-02 15:04 MST"), lifetime(overlap)))
	} else {
		h.auditLog(r.Context(), s, "apikey.rotate", fmt.Sprintf("API key %s… replaced by %s…; no overlap", oldPrefix, m.APIKeyPrefix))
	}
	return h.renderProfile(w, r, s, http.StatusOK, map[string]any{"NewKey": key, "OldPrefix": oldPrefix,
		"OldKeyUntil": until, "Overlap": overlap})
}

func (h *handler) webhookSecret(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	now := h.Now()
	switch r.PostFormValue("action") {
	case "reveal":
		m, err := h.merchantOf(r, s)
		if err != nil {
			return err
		}
		secret, err := h.Sealer.Open(m.SealedSecret, m.ID)
		if err != nil {
			return err
		}
		h.auditLog(r.Context(), s, "webhook-secret.reveal", "webhook secret shown")
		return h.renderProfile(w, r, s, http.StatusOK, map[string]any{"Secret": secret})
	case "rotate":
		overlap, err := merchant.ParseOverlap(r.PostFormValue("overlap"))
		if err != nil {
			return h.renderProfile(w, r, s, http.StatusBadRequest, map[string]any{"Error": "Choose how long the old secret keeps signing: none, 1 hour, 24 hours or 7 days."})
		}
		secret, err := h.NewWebhookSecret()
		if err != nil {
			return err
		}
		m, err := h.updateMerchant(r, s, func(m *merchant.Merchant) error {
			m.RotateWebhookSecret(h.Sealer.Seal(secret, m.ID), overlap, now)
			return nil
		})
		if err != nil {
			return err
		}
		notice := "New webhook secret; notifications are signed with it alone from now on."
		detail := "webhook secret replaced; no overlap"
		if _, ok := m.PreviousWebhookSecret(now); ok {
			notice = fmt.Sprintf("New webhook secret; until %s notifications carry a signature with the old secret too.", when(m.PrevSecretUntil))
			detail = fmt.Sprintf("webhook secret replaced; the old one signs too until %s (%s overlap)", m.PrevSecretUntil.UTC().Format("2006-01-02 15:04 MST"), lifetime(overlap))
		}
		h.auditLog(r.Context(), s, "webhook-secret.rotate", detail)
		return h.renderProfile(w, r, s, http.StatusOK, map[string]any{"Secret": secret, "Notice": notice})
	case "end-previous":
		ended := false
		if _, err := h.updateMerchant(r, s, func(m *merchant.Merchant) error {
			_, ended = m.PreviousWebhookSecret(now)
			m.EndPreviousWebhookSecret()
			return nil
		}); err != nil {
			return err
		}
		if !ended {
			return h.renderProfile(w, r, s, http.StatusOK, map[string]any{"Notice": "No previous webhook secret was signing."})
		}
		h.auditLog(r.Context(), s, "webhook-secret.end-previous", "previous webhook secret ended early")
		return h.renderProfile(w, r, s, http.StatusOK, map[string]any{"Notice": "Notifications are signed with the current webhook secret alone from now on."})
	}
	return refuse(errkind.Invalid, "Unknown action.")
}

func (h *handler) sftp(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	var err error
	var detail, notice string
	switch r.PostFormValue("action") {
	case "password":
		pw := r.PostFormValue("password")
		if len([]rune(pw)) < MinPasswordLen || len(pw) > 256 {
			return h.renderProfile(w, r, s, http.StatusBadRequest, map[string]any{"Error": fmt.Sprintf("The SFTP password needs at least %d characters.", MinPasswordLen)})
		}
		err, detail, notice = h.Ops.SetSFTPPassword(r.Context(), s.MerchantID, pw), "SFTP password set", "SFTP password set."
		if err == nil { // a new password takes back the old one's failures and lock
			err = h.counting().Clear(r.Context(), sftpuser.AttemptKey(s.MerchantID))
		}
	case "add-key":
		key := strings.TrimSpace(r.PostFormValue("key"))
		err, detail, notice = h.Ops.AddSFTPKey(r.Context(), s.MerchantID, key), "SFTP key added: "+keyLabel(key), "SSH key added."
	case "remove-key":
		key := r.PostFormValue("key")
		err, detail, notice = h.Ops.RemoveSFTPKey(r.Context(), s.MerchantID, key), "SFTP key removed: "+keyLabel(key), "SSH key removed."
	default:
		return refuse(errkind.Invalid, "Unknown action.")
	}
	var se *pageError
	if errors.As(err, &se) {
		return h.renderProfile(w, r, s, se.status(), map[string]any{"Error": se.e.Detail})
	}
	if err != nil {
		return err
	}
	h.auditLog(r.Context(), s, "sftp.update", detail)
	return h.renderProfile(w, r, s, http.StatusOK, map[string]any{"Notice": notice})
}

// keyLabel names a public key in the audit log: type and comment.
func keyLabel(k string) string {
	f := strings.Fields(k)
	if len(f) >= 3 {
		return f[0] + " " + f[2]
	}
	if len(f) > 0 {
		return f[0]
	}
	return ""
}

// BadInput is an error the dashboard shows as 400 with its message (Ops
// implementations return it for invalid keys).
func BadInput(msg string) error { return refuse(errkind.Invalid, msg) }

// ---- payments ----

const pageSize = 25

func (h *handler) paymentQuery(r *http.Request, s *dashuser.Session) (payment.Query, map[string]string, error) {
	q := r.URL.Query()
	f := map[string]string{"status": q.Get("status"), "from": q.Get("from"), "to": q.Get("to"), "ref": q.Get("ref")}
	pq := payment.Query{MerchantID: s.MerchantID, Reference: strings.TrimSpace(q.Get("ref")), Cursor: q.Get("cursor"), Limit: pageSize}
	if v := f["status"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3 {
			return pq, f, refuse(errkind.Invalid, "Unknown status.")
		}
		pq.Status = n
	}
	for _, d := range []struct {
		v   string
		t   *time.Time
		end bool
	}{{f["from"], &pq.From, false}, {f["to"], &pq.To, true}} {
		if d.v == "" {
			continue
		}
		t, err := time.Parse("2006-01-02", d.v)
		if err != nil {
			return pq, f, refuse(errkind.Invalid, "Dates look like 2026-01-31.")
		}
		if d.end {
			t = t.Add(24*time.Hour - time.Nanosecond)
		}
		*d.t = t
	}
	return pq, f, nil
}

// paymentRow is a payment request as the list shows it.
type paymentRow struct {
	*payment.Request
	StatusName string
	TxStatus   string
}

var requestStatusNames = map[payment.RequestStatus]string{payment.RequestPaid: "paid", payment.RequestUnpaid: "unpaid", payment.RequestCancelled: "cancelled"}

func txStatusName(st payment.TransactionStatus) string {
	switch st {
	case payment.TxApproved:
		return "approved"
	case payment.TxDeclined:
		return "declined"
	case payment.TxPending:
		return "pending"
	}
	return strconv.Itoa(int(st))
}

func rowOf(p *payment.Request) paymentRow {
	row := paymentRow{Request: p, StatusName: requestStatusNames[p.Status]}
	if p.TransactionStatus != nil {
		row.TxStatus = txStatusName(*p.TransactionStatus)
	}
	return row
}

func (h *handler) payments(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	pq, f, err := h.paymentQuery(r, s)
	if err != nil {
		return err
	}
	reqs, next, err := h.Store.PaymentRequestsOf(r.Context(), pq)
	if err != nil && errkind.Is(err, errkind.NotFound) {
		return refuse(errkind.Invalid, "This page link is invalid; start from the first page.")
	}
	if err != nil {
		return err
	}
	rows := make([]paymentRow, len(reqs))
	for i, p := range reqs {
		rows[i] = rowOf(p)
	}
	qs := url.Values{}
	for k, v := range f {
		if v != "" {
			qs.Set(k, v)
		}
	}
	var nextURL string
	if next != "" {
		n := url.Values{}
		for k, v := range qs {
			n[k] = v
		}
		n.Set("cursor", next)
		nextURL = MerchantPath(s.MerchantID, "/payments?"+n.Encode())
	}
	h.render(w, r, http.StatusOK, "payments", s, map[string]any{"Rows": rows, "F": f, "Next": nextURL,
		"Export": MerchantPath(s.MerchantID, "/payments/export?"+qs.Encode()), "First": pq.Cursor != ""})
	return nil
}

// maxExport bounds one CSV export.
const maxExport = 10000

func (h *handler) exportPayments(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	pq, _, err := h.paymentQuery(r, s)
	if err != nil {
		return err
	}
	pq.Cursor, pq.Limit = "", 500
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="payments.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"paymentRequestId", "createdAt", "status", "amount", "unit", "referenceId", "transactionId", "transactionStatus", "code", "message"})
	for n := 0; n < maxExport; {
		reqs, next, err := h.Store.PaymentRequestsOf(r.Context(), pq)
		if err != nil {
			return err
		}
		for _, p := range reqs {
			row := rowOf(p)
			code, msg := "", ""
			if p.LastLog != nil {
				code, msg = string(p.LastLog.Code), p.LastLog.Message
			}
			txID := ""
			if p.TransactionID != 0 {
				txID = strconv.FormatInt(p.TransactionID, 10)
			}
			_ = cw.Write([]string{strconv.FormatInt(p.ID, 10), p.CreatedAt.UTC().Format(time.RFC3339), row.StatusName, amount(p.Amount, p.Unit), p.Unit,
				csvSafe(p.ReferenceID), txID, row.TxStatus, code, csvSafe(msg)})
		}
		n += len(reqs)
		if next == "" {
			break
		}
		pq.Cursor = next
	}
	cw.Flush()
	return cw.Error()
}

// csvSafe defuses spreadsheet formulas in merchant-supplied text.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// requestOf loads a payment request of the page's merchant; another
// merchant's is not found.
func (h *handler) requestOf(r *http.Request, s *dashuser.Session) (*payment.Request, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, errNotFound
	}
	p, err := h.Store.PaymentRequest(r.Context(), id)
	if err != nil && errkind.Is(err, errkind.NotFound) || err == nil && p.MerchantID != s.MerchantID {
		return nil, errNotFound
	}
	return p, err
}

type txRow struct {
	*payment.Transaction
	StatusName string
	Refundable bool
	RefundInfo string
}

func (h *handler) paymentDetail(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	return h.renderDetail(w, r, s, http.StatusOK, map[string]any{})
}

func (h *handler) renderDetail(w http.ResponseWriter, r *http.Request, s *dashuser.Session, status int, data map[string]any) error {
	p, err := h.requestOf(r, s)
	if err != nil {
		return err
	}
	txs, err := h.Store.TransactionsOfRequest(r.Context(), p.ID)
	if err != nil {
		return err
	}
	rows := make([]txRow, 0, len(txs))
	for _, t := range txs {
		if t.MerchantID != s.MerchantID {
			continue
		}
		tr := txRow{Transaction: t, StatusName: txStatusName(t.Status), Refundable: t.Status == payment.TxApproved && t.Refund == nil}
		if t.Refund != nil {
			tr.RefundInfo = t.Refund.Status
		}
		if a := t.After; a != nil {
			for _, rf := range a.Refunds {
				// Made in Stripe's Dashboard: recorded, and the service's
				// full refund is no longer offered.
				tr.RefundInfo = strings.TrimSpace(tr.RefundInfo + " " + rf.Status + " in Stripe (" + rf.Amount.String() + " " + rf.Unit + ")")
				tr.Refundable = false
			}
		}
		rows = append(rows, tr)
	}
	dl, err := h.Ops.Deliveries(r.Context(), p.ID)
	if err != nil {
		return err
	}
	data["P"] = rowOf(p)
	data["Txs"] = rows
	data["Deliveries"] = dl
	data["Notifiable"] = notifiable(p)
	h.render(w, r, status, "payment", s, data)
	return nil
}

func (h *handler) redeliver(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	p, err := h.requestOf(r, s)
	if err != nil {
		return err
	}
	if !notifiable(p) {
		return h.renderDetail(w, r, s, http.StatusConflict, map[string]any{"Error": "This payment request has no settled transaction to notify."})
	}
	ev, err := h.Ops.Redeliver(r.Context(), p)
	if err != nil {
		return err
	}
	return h.renderDetail(w, r, s, http.StatusOK, map[string]any{"Notice": "Notification " + ev + " queued for delivery."})
}

// txOf finds transaction tx (form or query value) of the request of r.
func (h *handler) txOf(r *http.Request, s *dashuser.Session, raw string) (*payment.Request, *payment.Transaction, error) {
	p, err := h.requestOf(r, s)
	if err != nil {
		return nil, nil, err
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return nil, nil, errNotFound
	}
	txs, err := h.Store.TransactionsOfRequest(r.Context(), p.ID)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range txs {
		if t.ID == id && t.MerchantID == s.MerchantID {
			return p, t, nil
		}
	}
	return nil, nil, errNotFound
}

func (h *handler) refundConfirm(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	p, t, err := h.txOf(r, s, r.URL.Query().Get("tx"))
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "refund", s, map[string]any{"P": p, "T": t})
	return nil
}

func (h *handler) refund(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	p, t, err := h.txOf(r, s, r.PostFormValue("tx"))
	if err != nil {
		return err
	}
	if r.PostFormValue("confirm") != "yes" {
		h.render(w, r, http.StatusBadRequest, "refund", s, map[string]any{"P": p, "T": t, "Error": "Tick the box to confirm the refund."})
		return nil
	}
	m, err := h.merchantOf(r, s)
	if err != nil {
		return err
	}
	st, err := h.Ops.Refund(r.Context(), m, t.ID)
	// The payments core says why it refuses a refund in kinds (not
	// refundable, already refunded, …): shown with the form. A failure
	// (5xx) is the error page's.
	if e, ok := errkind.As(err); ok && httpapi.Status(e) < http.StatusInternalServerError {
		return h.renderDetail(w, r, s, httpapi.Status(e), map[string]any{"Error": e.Detail})
	}
	if err != nil {
		return err
	}
	h.auditLog(r.Context(), s, "payment.refund", fmt.Sprintf("transaction %d of payment request %d (%s): %s", t.ID, p.ID, moneyText(t.Amount, t.Unit), st))
	return h.renderDetail(w, r, s, http.StatusOK, map[string]any{"Notice": fmt.Sprintf("Refund of transaction %d: %s.", t.ID, st)})
}

// ---- batches ----

func (h *handler) batches(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	b, err := h.Ops.Batches(r.Context(), s.MerchantID)
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "batches", s, map[string]any{"Batches": b})
	return nil
}

func (h *handler) batchResult(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	file := r.URL.Query().Get("file")
	if file == "" || strings.ContainsAny(file, "/\\") || strings.HasPrefix(file, ".") {
		return errNotFound
	}
	rc, err := h.Ops.BatchResult(r.Context(), s.MerchantID, file)
	if err != nil && errkind.Is(err, errkind.NotFound) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename=%q`, file))
	_, err = io.Copy(w, rc)
	return err
}

// ---- users and audit ----

func (h *handler) users(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	return h.renderUsers(w, r, s, http.StatusOK, map[string]any{})
}

func (h *handler) renderUsers(w http.ResponseWriter, r *http.Request, s *dashuser.Session, status int, data map[string]any) error {
	ms, err := h.Store.Members(r.Context(), s.MerchantID)
	if err != nil {
		return err
	}
	data["Members"] = ms
	data["Now"] = h.Now()
	h.render(w, r, status, "users", s, data)
	return nil
}

func (h *handler) audit(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	e, err := h.Store.AuditEntries(r.Context(), s.MerchantID, 200)
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "audit", s, map[string]any{"Entries": e})
	return nil
}

// notifiable: the request's latest attempt is final (approved or declined),
// the only states a notification carries.
func notifiable(p *payment.Request) bool {
	return p.TransactionID != 0 && p.TransactionStatus != nil && p.LastLog != nil &&
		(*p.TransactionStatus == payment.TxApproved || *p.TransactionStatus == payment.TxDeclined)
}
