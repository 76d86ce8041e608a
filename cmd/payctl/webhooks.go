package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/webhook"
)

// forwardTimeout matches what the service allows a notify URL: an answer
// after 30 s counts as a failure.
const forwardTimeout = 30 * time.Second

type listenOptions struct {
	port                int
	apiKey, secret      string
	forwardTo, merchant string
}

func webhooksCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "webhooks",
		Short:   "Receive notifications locally while integrating",
		Example: "  payctl --local webhooks listen --forward-to http://localhost:8080/hooks",
	}
	var o listenOptions
	listen := &cobra.Command{
		Use:   "listen [--forward-to URL] [--merchant ID] [--port 4000]",
		Short: "Receive, verify, print and forward notifications (like stripe listen)",
		Long: `listen runs a notification receiver on 127.0.0.1:PORT. It prints one JSON
line per notification on stdout (its fields, and whether each signature
verifies), a short human line on stderr, and with --forward-to sends it on to
URL with the original headers and body, printing the forward's status.

With --local it attaches to a merchant of the local stack (--merchant, default
the seeded merchant of stack.json): it reads the merchant's API key and
webhook secret to verify the signatures, and points the merchant's notify URL
at the listener for the session, restoring the previous URL on exit (Ctrl-C,
SIGTERM). Payment requests created with their own notifyUrl keep it.

With --forward-to, the service gets the forward target's answer (502 when it
cannot be reached), so your endpoint's failures are retried as in production;
without it every notification is answered 200.

Without --local, listen is only a receiver: give --api-key and/or
--webhook-secret, and point a notify URL at it yourself.`,
		Example: `  payctl --local webhooks listen --forward-to http://localhost:8080/hooks
  payctl --local webhooks listen --merchant mer_... --port 0
  payctl webhooks listen --port 8080 --api-key prk_test_... --webhook-secret whsec_...`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return webhooksListen(cmd.Context(), *g, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := listen.Flags()
	f.IntVar(&o.port, "port", 4000, "port on 127.0.0.1 (0: any free port)")
	f.StringVar(&o.apiKey, "api-key", "", "merchant API key, verifies X-Signature (with --local: read from the merchant)")
	f.StringVar(&o.secret, "webhook-secret", "", "merchant webhook secret, verifies webhook-signature and the JSON variant (with --local: read from the merchant)")
	f.StringVar(&o.forwardTo, "forward-to", "", "forward every notification to this URL, with its original headers and body")
	f.StringVar(&o.merchant, "merchant", "", "with --local: the merchant to attach to (default: the seeded merchant)")
	c.AddCommand(listen)
	return c
}

// listenLine is the receiver's line plus what the forward did.
type listenLine struct {
	webhook.Received
	Event   string   `json:"event,omitempty"` // approved or declined
	Forward *forward `json:"forward,omitempty"`
}

type forward struct {
	URL        string `json:"url"`
	Status     int    `json:"status,omitempty"`
	DurationMS int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// webhooksListen runs until ctx ends (Ctrl-C).
func webhooksListen(ctx context.Context, g globals, o listenOptions, stdout, stderr io.Writer) error {
	if o.forwardTo != "" {
		if u, err := urlOK(o.forwardTo); err != nil {
			return usageError("--forward-to: " + err.Error())
		} else {
			o.forwardTo = u
		}
	}
	if o.port < 0 || o.port > 65535 {
		return usageError("--port must be 0..65535")
	}
	var session *notifySession
	if g.local {
		s, err := attach(ctx, g, &o)
		if err != nil {
			return err
		}
		session = s
	} else if o.merchant != "" {
		return usageError("--merchant needs --local: a deployed stack cannot reach a listener on this machine")
	}
	if o.apiKey == "" && o.secret == "" {
		return usageError("give --api-key and/or --webhook-secret to verify signatures (or use --local)")
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.port)))
	if err != nil {
		return err
	}
	defer l.Close()
	url := "http://" + l.Addr().String() + "/"
	fmt.Fprintf(stderr, "payctl: listening for notifications on %s (Ctrl-C to stop)\n", url)
	if session != nil {
		restore, err := session.point(ctx, url, stderr)
		if err != nil {
			return err
		}
		defer restore()
	}
	if o.forwardTo != "" {
		fmt.Fprintf(stderr, "payctl: forwarding to %s\n", o.forwardTo)
	}
	fmt.Fprintln(stderr, "payctl: Ready")
	h := &listener{apiKey: o.apiKey, secret: o.secret, forwardTo: o.forwardTo, stdout: stdout, stderr: stderr,
		client: &http.Client{Timeout: forwardTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func urlOK(s string) (string, error) {
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return "", errors.New("an http:// or https:// URL is required")
	}
	if _, err := http.NewRequest(http.MethodPost, s, nil); err != nil {
		return "", err
	}
	return s, nil
}

type listener struct {
	apiKey, secret, forwardTo string
	client                    *http.Client
	mu                        sync.Mutex // one line at a time
	stdout, stderr            io.Writer
}

func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := webhook.ReadPosted(w, r)
	if !ok {
		return
	}
	line := listenLine{Received: webhook.Inspect(r.Header, body, l.apiKey, l.secret, time.Now())}
	line.Event = eventName(line.Fields)
	status := http.StatusOK
	if l.forwardTo != "" {
		line.Forward = l.forward(r, body)
		status = line.Forward.Status
		if status == 0 {
			status = http.StatusBadGateway
		}
	}
	l.mu.Lock()
	_ = json.NewEncoder(l.stdout).Encode(line)
	fmt.Fprintf(l.stderr, "%s  --> %s [%s] %s\n", line.ReceivedAt.Local().Format("2006-01-02 15:04:05"), orUnknown(line.Event), line.WebhookID, verdict(line.Received))
	if f := line.Forward; f != nil {
		if f.Error != "" {
			fmt.Fprintf(l.stderr, "%19s  <-- [ERR] POST %s: %s\n", "", f.URL, f.Error)
		} else {
			fmt.Fprintf(l.stderr, "%19s  <-- [%d] POST %s (%d ms)\n", "", f.Status, f.URL, f.DurationMS)
		}
	}
	l.mu.Unlock()
	w.WriteHeader(status)
}

// forward sends the notification on with its original headers and body
// (hop-by-hop headers excepted, as any proxy does).
func (l *listener) forward(r *http.Request, body []byte) *forward {
	f := &forward{URL: l.forwardTo}
	ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.forwardTo, bytes.NewReader(body))
	if err != nil {
		f.Error = err.Error()
		return f
	}
	for k, vs := range r.Header {
		if hopByHop[http.CanonicalHeaderKey(k)] {
			continue
		}
		req.Header[k] = append([]string(nil), vs...)
	}
	start := time.Now()
	resp, err := l.client.Do(req)
	f.DurationMS = time.Since(start).Milliseconds()
	if err != nil {
		f.Error = err.Error()
		return f
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, webhook.MaxBody))
	resp.Body.Close()
	f.Status = resp.StatusCode
	return f
}

var hopByHop = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true}

// eventName names a notification by its outcome: the form variant's
// transactionStatusId, the JSON variant's status.
func eventName(fields map[string]any) string {
	switch fmt.Sprint(fields["transactionStatusId"]) {
	case "1":
		return "approved"
	case "2":
		return "declined"
	}
	switch fields["status"] {
	case webhook.StatusCompleted:
		return "approved"
	case webhook.StatusFailed:
		return "declined"
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "notification"
	}
	return s
}

// verdict summarises the signature checks for the human line.
func verdict(r webhook.Received) string {
	checks := map[string]webhook.Check{"X-Signature": r.XSignature, "webhook-signature": r.StandardWebhook}
	if r.JSONSignature != nil {
		checks["signature"] = *r.JSONSignature
	}
	var bad []string
	for _, name := range []string{"X-Signature", "webhook-signature", "signature"} {
		if c, ok := checks[name]; ok && !c.Valid {
			bad = append(bad, name+": "+c.Error)
		}
	}
	if len(bad) == 0 {
		return "signatures verified"
	}
	return "NOT VERIFIED (" + strings.Join(bad, "; ") + ")"
}

// notifySession is a merchant whose notify URL listen points at itself.
type notifySession struct {
	e  *env
	id string
}

// attach resolves the merchant of a --local listen and fills in the keys
// that were not given.
func attach(ctx context.Context, g globals, o *listenOptions) (*notifySession, error) {
	id := o.merchant
	if id == "" {
		info, err := devstack.ReadInfo(g.stateDir)
		if err != nil {
			return nil, err
		}
		id = info.Merchant.ID
	}
	cctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	e, err := connect(cctx, g)
	if err != nil {
		return nil, err
	}
	m, err := load(cctx, e, id)
	if err != nil {
		return nil, err
	}
	if o.apiKey == "" {
		if o.apiKey, err = e.sealer.Open(m.SealedAPIKey, m.ID); err != nil {
			return nil, fmt.Errorf("open the API key of merchant %s: %w", m.ID, err)
		}
	}
	if o.secret == "" && m.SealedSecret != "" {
		if o.secret, err = e.sealer.Open(m.SealedSecret, m.ID); err != nil {
			return nil, fmt.Errorf("open the webhook secret of merchant %s: %w", m.ID, err)
		}
	}
	return &notifySession{e: e, id: m.ID}, nil
}

// point sets the merchant's notify URL to url and returns the function that
// puts the previous one back, unless somebody changed it meanwhile.
func (s *notifySession) point(ctx context.Context, url string, stderr io.Writer) (func(), error) {
	cctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	var previous string
	if _, err := updateMerchant(cctx, s.e, s.id, func(m *merchant.Merchant) error {
		previous, m.NotifyURL = m.NotifyURL, url
		return nil
	}); err != nil {
		return nil, fmt.Errorf("point the notify URL of merchant %s here: %w", s.id, err)
	}
	fmt.Fprintf(stderr, "payctl: merchant %s notifies here until exit (was %q); if payctl is killed, restore it with\n"+
		"  payctl --local merchant update --id %s --notify-url '%s'\n", s.id, previous, s.id, previous)
	return func() {
		// ctx has ended by now (Ctrl-C): the restore gets its own time.
		rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		changed := errors.New("changed meanwhile")
		_, err := updateMerchant(rctx, s.e, s.id, func(m *merchant.Merchant) error {
			if m.NotifyURL != url {
				return changed
			}
			m.NotifyURL = previous
			return nil
		})
		switch {
		case errors.Is(err, changed):
			fmt.Fprintf(stderr, "payctl: the notify URL of merchant %s was changed meanwhile; left as it is\n", s.id)
		case err != nil:
			fmt.Fprintf(stderr, "payctl: could not restore the notify URL of merchant %s (%v); restore it with\n"+
				"  payctl --local merchant update --id %s --notify-url '%s'\n", s.id, err, s.id, previous)
		default:
			fmt.Fprintf(stderr, "payctl: notify URL of merchant %s restored to %q\n", s.id, previous)
		}
	}, nil
}
