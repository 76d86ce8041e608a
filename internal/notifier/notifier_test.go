package notifier_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/notifierwire"
	"github.com/payreq/payreq/internal/wire/reconcilerwire"
)

func TestMain(m *testing.M) {
	// Scaled retry schedule (1 s, 2 s: three attempts) and a 1 s send timeout.
	testenv.Options.Env = map[string]string{"NOTIFY_RETRY_SCHEDULE": "1s,2s", "NOTIFY_TIMEOUT": "1s"}
	testenv.Main(m)
}

// hit is one request a receiver got.
type hit struct {
	at     time.Time
	header http.Header
	body   []byte
}

// receiver answers with the scripted statuses (the last one repeats).
type receiver struct {
	mu      sync.Mutex
	hits    []hit
	script  []int
	handler func(w http.ResponseWriter, r *http.Request) bool // true: handled
	srv     *httptest.Server
}

func newReceiver(t *testing.T, script ...int) *receiver {
	rc := &receiver{script: script}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.hits = append(rc.hits, hit{time.Now(), r.Header.Clone(), body})
		n := len(rc.hits)
		status := rc.script[min(n-1, len(rc.script)-1)]
		h := rc.handler
		rc.mu.Unlock()
		if h != nil && h(w, r) {
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) got() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

func (rc *receiver) setScript(s ...int) { rc.mu.Lock(); rc.script = s; rc.mu.Unlock() }

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settle does what the payment path does when a transaction is approved: it
// writes the request with the event in its outbox and (unless crash) sends
// the event to the notifications queue.
func settle(t *testing.T, m testenv.Merchant, notifyURL string, crash bool) payment.NotifyEvent {
	t.Helper()
	return settleOn(t, m, notifyURL, crash, payment.ChannelInteractive)
}

// settleOn is settle for a transaction of channel ch, whose event goes to
// that channel's queue.
func settleOn(t testing.TB, m testenv.Merchant, notifyURL string, crash bool, ch payment.Channel) payment.NotifyEvent {
	t.Helper()
	s := testenv.Stack(t)
	now := time.Now().UTC()
	tx := payment.TxApproved
	req := &payment.Request{ID: ids.New(now), MerchantID: m.ID, Status: payment.RequestPaid, Amount: decimal.RequireFromString("10.5"),
		Unit: "EUR", RecipientName: "Shop", ReferenceID: "order-9", Notes: "n", NotifyURL: notifyURL,
		Client:        &payment.Client{ID: "c1", Name: "Ann", Email: "ann@example.com", Phone: "4915112345678", MemberID: "m1"},
		TransactionID: ids.New(now), TransactionNumber: "TX1", TransactionStatus: &tx, CreatedAt: now, UpdatedAt: now}
	testenv.Seeded(t, "payment request", s.Store.CreatePaymentRequest(context.Background(), req))
	// The notifier builds from the stored transaction, so it must exist.
	testenv.Seeded(t, "transaction", s.Store.CreateTransaction(context.Background(), &payment.Transaction{ID: req.TransactionID, Number: "TX1",
		PaymentRequestID: req.ID, MerchantID: m.ID, Status: payment.TxApproved, Message: "Approved", Method: "wallet", Channel: ch,
		Amount: req.Amount, Unit: req.Unit, Reference: payment.ChargeReference(req.TransactionID), CreatedAt: now, UpdatedAt: now}))
	ev, err := payment.NewNotifyEvent(req, req.TransactionID, payment.TxApproved, payment.LastLog{TransactionStatusID: 1, Message: "Approved"}, now)
	if err != nil {
		t.Fatal(err)
	}
	ev.Channel = ch
	if err := s.Store.PutOutbox(context.Background(), ev, now); err != nil {
		t.Fatal(err)
	}
	if !crash {
		q := s.Info.Queues["NotificationsQueue"]
		if ch.Batch() {
			q = s.Info.Queues["BatchNotificationsQueue"]
		}
		if err := queue.New(sqsClient(t)).Send(context.Background(), q, ev, 0); err != nil {
			t.Fatal(err)
		}
	}
	return ev
}

func sqsClient(t testing.TB) *sqs.Client {
	testenv.Stack(t) // the emulators' endpoints
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sqs.NewFromConfig(cfg)
}

func deliveries(t *testing.T, requestID int64) []payment.DeliveryAttempt {
	d, err := testenv.Stack(t).Store.Deliveries(context.Background(), requestID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDeliveredSignedAndVerifiable(t *testing.T) {
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 200)
	ev := settle(t, m, rc.srv.URL+"/hooks?token=abc", false)
	waitFor(t, "delivery", 15*time.Second, func() bool { return len(rc.got()) == 1 && len(deliveries(t, ev.RequestID)) == 1 })
	h := rc.got()[0]

	// X-Signature = Base64(HMAC-SHA512(raw body, API key)), computed independently.
	mac := hmac.New(sha512.New, []byte(m.APIKey))
	mac.Write(h.body)
	if got, want := h.header.Get("X-Signature"), base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != want {
		t.Fatalf("X-Signature %q, want %q", got, want)
	}
	// Standard Webhooks: v1,Base64(HMAC-SHA256(secret bytes, id.timestamp.body)).
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(m.WebhookSecret, "whsec_"))
	sw := hmac.New(sha256.New, key)
	sw.Write([]byte(h.header.Get("webhook-id") + "." + h.header.Get("webhook-timestamp") + "." + string(h.body)))
	if got := h.header.Get("webhook-signature"); got != "v1,"+base64.StdEncoding.EncodeToString(sw.Sum(nil)) {
		t.Fatalf("webhook-signature %q", got)
	}
	if h.header.Get("webhook-id") != "msg_"+ev.EventID || h.header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		t.Fatalf("headers %v", h.header)
	}
	form, err := url.ParseQuery(string(h.body))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"id": strconv.FormatInt(ev.RequestID, 10), "transactionId": strconv.FormatInt(ev.TransactionID, 10),
		"transactionStatusId": "1", "paymentRequestStatusId": "1", "merchantId": m.ID, "unit": "EUR", "grossAmount": "10.50",
		"fee": "0.00", "netAmount": "10.50", "referenceId": "order-9", "notes": "n", "clientId": "c1", "clientName": "Ann",
		"clientEmail": "ann@example.com", "clientPhone": "4915112345678", "clientMemberId": "m1",
		// message is the failure reason: empty on an approval (docs/notifications.md).
		"message": "", "code": ""}
	for k, v := range want {
		if form.Get(k) != v {
			t.Errorf("field %s = %q, want %q", k, form.Get(k), v)
		}
	}
	if len(form) != 18 {
		t.Errorf("body has %d fields, the spec lists 18: %s", len(form), h.body)
	}
	d := deliveries(t, ev.RequestID)
	if d[0].Outcome != "delivered" || d[0].StatusCode != 200 || strings.Contains(d[0].URL, "token=abc") {
		t.Fatalf("recorded attempt %+v (the query string may hold a secret and must not be stored)", d[0])
	}
}

func TestRetriesWithGrowingDelaysUntilDelivered(t *testing.T) {
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 500, 500, 200)
	ev := settle(t, m, rc.srv.URL, false)
	waitFor(t, "three attempts", 30*time.Second, func() bool { return len(deliveries(t, ev.RequestID)) == 3 })
	time.Sleep(1500 * time.Millisecond) // no fourth attempt may follow
	hits := rc.got()
	if len(hits) != 3 {
		t.Fatalf("%d attempts, want exactly 3", len(hits))
	}
	gap1, gap2 := hits[1].at.Sub(hits[0].at), hits[2].at.Sub(hits[1].at)
	if gap1 < 700*time.Millisecond || gap2 <= gap1 {
		t.Fatalf("delays %v then %v: want about 1 s then about 2 s", gap1, gap2)
	}
	for _, h := range hits {
		if h.header.Get("webhook-id") != hits[0].header.Get("webhook-id") {
			t.Fatal("webhook-id changed between retries")
		}
	}
	d := deliveries(t, ev.RequestID)
	outcomes := []string{d[0].Outcome, d[1].Outcome, d[2].Outcome}
	if strings.Join(outcomes, ",") != "retry,retry,delivered" || d[0].StatusCode != 500 || d[0].NextAt.IsZero() {
		t.Fatalf("recorded attempts %+v", d)
	}
}

// The notifier signs what the store says, not what a queue message claims:
// a forged "declined" for an approved payment is delivered as approved, and
// a message naming an unknown transaction is dropped.
func TestQueueMessageClaimsAreNotSigned(t *testing.T) {
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 200)
	ev := settle(t, m, rc.srv.URL, true) // approved and stored; nothing queued
	forged := ev
	forged.TransactionStatusID, forged.PaymentRequestStatusID, forged.Code, forged.Message = payment.TxDeclined, payment.RequestUnpaid, "999", "forged"
	unknown := ev
	unknown.EventID, unknown.TransactionID = "evt_forged", ev.TransactionID+1
	q := queue.New(sqsClient(t))
	for _, e := range []payment.NotifyEvent{unknown, forged} {
		if err := q.Send(context.Background(), testenv.Stack(t).Info.Queues["NotificationsQueue"], e, 0); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "delivery", 15*time.Second, func() bool { return len(rc.got()) >= 1 })
	time.Sleep(500 * time.Millisecond)
	hits := rc.got()
	if len(hits) != 1 {
		t.Fatalf("%d deliveries, want 1 (the unknown transaction's message dropped)", len(hits))
	}
	form, err := url.ParseQuery(string(hits[0].body))
	if err != nil {
		t.Fatal(err)
	}
	if form.Get("transactionStatusId") != "1" || form.Get("paymentRequestStatusId") != "1" || form.Get("code") != "" || form.Get("message") == "forged" {
		t.Fatalf("signed what the message claimed: %v", form)
	}
}

// 410 Gone stops the retries of that delivery and is recorded.
func TestGoneStopsRetries(t *testing.T) {
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 410, 200)
	ev := settle(t, m, rc.srv.URL, false)
	waitFor(t, "the first attempt", 15*time.Second, func() bool { return len(deliveries(t, ev.RequestID)) == 1 })
	time.Sleep(2500 * time.Millisecond) // the schedule's first retry (about 1 s) would have come
	if hits := rc.got(); len(hits) != 1 {
		t.Fatalf("%d attempts after a 410, want 1", len(hits))
	}
	if d := deliveries(t, ev.RequestID); d[0].Outcome != "gone" || d[0].StatusCode != 410 || !d[0].NextAt.IsZero() {
		t.Fatalf("recorded attempt %+v, want outcome gone", d[0])
	}
}

func TestExhaustedGoesToDLQThenRedriveDelivers(t *testing.T) {
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 503)
	ev := settle(t, m, rc.srv.URL, false)
	waitFor(t, "dead-lettering", 30*time.Second, func() bool {
		d := deliveries(t, ev.RequestID)
		return len(d) == 3 && d[2].Outcome == "dead-lettered"
	})
	rc.setScript(200)
	info := testenv.Stack(t).Info
	moved, _, err := notifier.Redrive(context.Background(), queue.New(sqsClient(t)), info.Queues["NotificationsDLQ"], info.Queues["NotificationsQueue"])
	if err != nil || moved < 1 {
		t.Fatalf("redrive moved %d: %v", moved, err)
	}
	waitFor(t, "delivery after redrive", 15*time.Second, func() bool {
		d := deliveries(t, ev.RequestID)
		return len(d) == 4 && d[3].Outcome == "delivered"
	})
}

func TestRedirectAndSlowReceiverAreFailures(t *testing.T) {
	m := testenv.NewMerchant(t)
	followed := newReceiver(t, 200)
	redirect := newReceiver(t, 200)
	redirect.handler = func(w http.ResponseWriter, r *http.Request) bool {
		http.Redirect(w, r, followed.srv.URL, http.StatusFound)
		return true
	}
	slow := newReceiver(t, 200)
	slow.handler = func(w http.ResponseWriter, r *http.Request) bool { time.Sleep(2 * time.Second); return false }

	evR := settle(t, m, redirect.srv.URL, false)
	evS := settle(t, m, slow.srv.URL, false)
	waitFor(t, "first attempts", 15*time.Second, func() bool {
		return len(deliveries(t, evR.RequestID)) >= 1 && len(deliveries(t, evS.RequestID)) >= 1
	})
	if d := deliveries(t, evR.RequestID)[0]; d.Outcome != "retry" || d.StatusCode != 302 {
		t.Fatalf("302 attempt %+v", d)
	}
	if len(followed.got()) != 0 {
		t.Fatal("the redirect was followed")
	}
	if d := deliveries(t, evS.RequestID)[0]; d.Outcome != "retry" || d.Error == "" {
		t.Fatalf("slow receiver attempt %+v, want a timeout failure", d)
	}
}

func TestDuplicateQueueDeliveryKeepsWebhookID(t *testing.T) {
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 200)
	ev := settle(t, m, rc.srv.URL, false)
	// SQS delivers at least once: the same message again.
	if err := queue.New(sqsClient(t)).Send(context.Background(), testenv.Stack(t).Info.Queues["NotificationsQueue"], ev, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both deliveries", 15*time.Second, func() bool { return len(rc.got()) == 2 })
	h := rc.got()
	if h[0].header.Get("webhook-id") == "" || h[0].header.Get("webhook-id") != h[1].header.Get("webhook-id") {
		t.Fatalf("webhook-ids %q %q", h[0].header.Get("webhook-id"), h[1].header.Get("webhook-id"))
	}
}

func TestReconcilerDeliversWhatACrashLeftInTheOutbox(t *testing.T) {
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 200)
	ev := settle(t, m, rc.srv.URL, true) // state changed, queue message never sent
	time.Sleep(500 * time.Millisecond)
	if len(rc.got()) != 0 {
		t.Fatal("delivered without a queue message?")
	}
	s := testenv.Stack(t)
	env, _ := s.Resources.Env("ReconcilerFunction")
	env["PAYREQ_LOCAL"], env["OUTBOX_GRACE"] = "1", "0s"
	run, err := reconcilerwire.Reconciler(context.Background(), func(k string) string { return env[k] }, wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The reconciler re-sends only while the notifications queue holds no
	// message (earlier tests' retries may still be there): run it, as the
	// schedule would, until the delivery arrives.
	waitFor(t, "reconciled delivery", 30*time.Second, func() bool {
		if len(rc.got()) > 0 {
			return true
		}
		if err := run(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		return len(rc.got()) > 0
	})
	time.Sleep(500 * time.Millisecond) // a duplicate would arrive now
	if len(rc.got()) != 1 {
		t.Fatalf("%d deliveries, want 1", len(rc.got()))
	}
	if rc.got()[0].header.Get("webhook-id") != "msg_"+ev.EventID {
		t.Fatal("wrong event delivered")
	}
	// The notifier cleared the outbox: another reconciler run sends nothing.
	waitFor(t, "outbox cleared", 5*time.Second, func() bool {
		entries, _ := s.Store.DueOutbox(context.Background(), 0, time.Now().Add(time.Hour), 1000)
		for shard := 1; shard < payment.OutboxShards; shard++ {
			more, _ := s.Store.DueOutbox(context.Background(), shard, time.Now().Add(time.Hour), 1000)
			entries = append(entries, more...)
		}
		for _, e := range entries {
			if e.Event.EventID == ev.EventID {
				return false
			}
		}
		return true
	})
}

// Outside local mode, loopback, private and metadata addresses are refused at
// dial time (after DNS resolution, so a name pointing at them is refused too).
func TestPrivateTargetsRefusedOutsideLocalMode(t *testing.T) {
	s := testenv.Stack(t)
	m := testenv.NewMerchant(t)
	rc := newReceiver(t, 200)
	port := rc.srv.URL[strings.LastIndex(rc.srv.URL, ":")+1:]
	// A private queue, so the local-mode notifier of the stack never sees the retries.
	sq := sqsClient(t)
	name := "ssrf-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	q, err := sq.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := s.Resources.Env("NotifierFunction")
	env["NOTIFICATIONS_QUEUE_URL"], env["NOTIFICATIONS_DLQ_URL"] = *q.QueueUrl, *q.QueueUrl
	delete(env, "PAYREQ_LOCAL")
	handle, err := notifierwire.Notifier(context.Background(), func(k string) string { return env[k] }, wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"http://127.0.0.1:" + port + "/", "http://localhost:" + port + "/", "http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		ev := settle(t, m, target, true)
		body, _ := json.Marshal(ev)
		resp, err := handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "1", Body: string(body)}}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s: %v %v", target, err, resp)
		}
		d := deliveries(t, ev.RequestID)
		if len(d) != 1 || d[0].Outcome != "retry" || !strings.Contains(d[0].Error, "not allowed") {
			t.Fatalf("%s: attempt %+v, want refused as blocked", target, d)
		}
	}
	if len(rc.got()) != 0 {
		t.Fatal("a loopback receiver was reached outside local mode")
	}
}

func TestNoNotifyURLMeansNoNotification(t *testing.T) {
	m := testenv.NewMerchant(t)
	ev := settle(t, m, "", false)
	waitFor(t, "skip record", 15*time.Second, func() bool {
		d := deliveries(t, ev.RequestID)
		return len(d) == 1 && d[0].Outcome == "skipped"
	})
}

var _ = devstack.Region

// End to end: a real approved and a real declined payment each produce one
// signed notification with the spec's statuses and code.
func TestPaymentsNotifyTheMerchant(t *testing.T) {
	rc := newReceiver(t, 200)
	m := testenv.NewMerchant(t, func(mm *merchant.Merchant) { mm.NotifyURL = rc.srv.URL })
	payer := func(token string) string {
		return `{"amount":"7.00","unit":"EUR","name":"Ann Lee","email":"ann@example.com","phoneNumber":"4915112345678",
			"address":"Main St 1","city":"Berlin","state":"BE","postalCode":"10115","country":"DE","token":"` + token + `"}`
	}
	api := testenv.Stack(t).Info.APIBase
	ok := testenv.Do(t, "POST", api+"/payments/h2h/44", m.APIKey, payer("tok_success")).JSON(t)
	ko := testenv.Do(t, "POST", api+"/payments/h2h/44", m.APIKey, payer("tok_insufficient_funds")).JSON(t)
	waitFor(t, "two notifications", 15*time.Second, func() bool { return len(rc.got()) == 2 })
	byID := map[string]url.Values{}
	for _, h := range rc.got() {
		f, _ := url.ParseQuery(string(h.body))
		byID[f.Get("id")] = f
	}
	a := byID[strconv.FormatInt(int64(ok["paymentRequestId"].(float64)), 10)]
	d := byID[strconv.FormatInt(int64(ko["paymentRequestId"].(float64)), 10)]
	if a.Get("transactionStatusId") != "1" || a.Get("paymentRequestStatusId") != "1" || a.Get("grossAmount") != "7.00" {
		t.Fatalf("approved notification %v", a)
	}
	if d.Get("transactionStatusId") != "2" || d.Get("paymentRequestStatusId") != "2" || d.Get("code") != "005" || d.Get("message") == "" {
		t.Fatalf("declined notification %v", d)
	}
}
