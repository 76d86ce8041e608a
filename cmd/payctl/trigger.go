package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/devstack"
)

// triggerEvent is one `payctl trigger` event: the sandbox test input
// (docs/sandbox.md) that produces it.
type triggerEvent struct {
	selector    int
	field, val  string // the method's field of the h2h body
	threeDS     bool   // answer the challenge with Approve
	description string
}

var triggerEvents = map[string]triggerEvent{
	"approved": {44, "token", "tok_success", false, "a wallet payment approved at once: an approved notification (transactionStatusId 1) within seconds"},
	"declined": {44, "token", "tok_declined", false, "a wallet payment declined at once (999): a declined notification (transactionStatusId 2) within seconds"},
	"pending":  {30, "upiId", "pending@upi", false, "a UPI payment that stays pending (3) for 5 minutes, then approves: no notification while pending (pending is never notified), an approved one after 5 minutes"},
	"3ds":      {44, "token", "tok_3ds_required", true, "a wallet payment that needs 3-D Secure; payctl answers the sandbox challenge with Approve: an approved notification (transactionStatusId 1) within seconds"},
}

func triggerNames() []string {
	var names []string
	for n := range triggerEvents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func triggerCmd(g *globals) *cobra.Command {
	var merchantID, amount, unit string
	var lines []string
	for _, n := range triggerNames() {
		lines = append(lines, fmt.Sprintf("  %-9s %s", n, triggerEvents[n].description))
	}
	c := &cobra.Command{
		Use:   "trigger <event>",
		Short: "Create and pay a sandbox request so that a notification fires",
		Long: `trigger creates and pays a sandbox payment request through the public API
(POST /payments/h2h/{n} with the merchant's API key and the sandbox test data
of docs/sandbox.md), so that the service sends the matching notification to
the merchant's notify URL, e.g. to 'payctl --local webhooks listen'.

Events:
` + strings.Join(lines, "\n") + `

With --local the merchant defaults to the seeded merchant of stack.json; on a
deployed sandbox stack give --merchant. A production stack is refused.`,
		Example: `  payctl --local trigger approved
  payctl --local trigger declined --amount 12.50 --currency USD
  payctl --local trigger 3ds --merchant mer_...`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("trigger takes one event (%s), got %d arguments", strings.Join(triggerNames(), ", "), len(args))
			}
			if _, ok := triggerEvents[args[0]]; !ok {
				return fmt.Errorf("unknown event %q: one of %s", args[0], strings.Join(triggerNames(), ", "))
			}
			return nil
		},
		ValidArgs: triggerNames(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), commandTimeout)
			defer cancel()
			out, err := trigger(ctx, *g, args[0], merchantID, amount, unit)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), out)
		},
	}
	c.Flags().StringVar(&merchantID, "merchant", "", "merchant id (with --local: default the seeded merchant)")
	c.Flags().StringVar(&amount, "amount", "10.00", "amount of the payment request (decimal)")
	c.Flags().StringVar(&unit, "currency", "EUR", "currency of the payment request")
	return c
}

type triggerResult struct {
	Event               string          `json:"event"`
	MerchantID          string          `json:"merchantId"`
	TestInput           string          `json:"testInput"`
	PaymentRequestID    int64           `json:"paymentRequestId"`
	TransactionID       int64           `json:"transactionId"`
	TransactionStatusID int             `json:"transactionStatusId"`
	LastLog             json.RawMessage `json:"lastLog,omitempty"`
	Notification        string          `json:"notification"`
}

// payResponse is the part of the h2h answer trigger reads.
type payResponse struct {
	PaymentRequestID    int64           `json:"paymentRequestId"`
	TransactionID       int64           `json:"transactionId"`
	TransactionStatusID int             `json:"transactionStatusId"`
	LastLog             json.RawMessage `json:"lastLog"`
	NextAction          *struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	} `json:"nextAction"`
}

func trigger(ctx context.Context, g globals, name, merchantID, amount, unit string) (*triggerResult, error) {
	ev := triggerEvents[name]
	if merchantID == "" {
		if !g.local {
			return nil, usageError("--merchant is required without --local")
		}
		info, err := devstack.ReadInfo(g.stateDir)
		if err != nil {
			return nil, err
		}
		merchantID = info.Merchant.ID
	}
	e, err := connect(ctx, g)
	if err != nil {
		return nil, err
	}
	if !e.sandbox {
		return nil, errors.New("trigger needs a sandbox stack: it pays with sandbox test data")
	}
	if e.apiBase == "" {
		return nil, errors.New("the stack has no API URL")
	}
	m, err := load(ctx, e, merchantID)
	if err != nil {
		return nil, err
	}
	apiKey, err := e.sealer.Open(m.SealedAPIKey, m.ID)
	if err != nil {
		return nil, fmt.Errorf("open the API key of merchant %s: %w", m.ID, err)
	}
	body := map[string]any{
		"amount": amount, "unit": unit, "referenceId": "payctl-trigger-" + name,
		"name": "Test Payer", "email": "payer@example.com", "phoneNumber": "4915112345678",
		"address": "Main St 1", "city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE",
		ev.field: ev.val,
	}
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := strings.TrimRight(e.apiBase, "/")
	var pay payResponse
	if err := callAPI(ctx, client, http.MethodPost, fmt.Sprintf("%s/payments/h2h/%d", base, ev.selector), apiKey, body, &pay); err != nil {
		return nil, err
	}
	res := &triggerResult{Event: name, MerchantID: m.ID, TestInput: ev.val, PaymentRequestID: pay.PaymentRequestID,
		TransactionID: pay.TransactionID, TransactionStatusID: pay.TransactionStatusID, LastLog: pay.LastLog, Notification: ev.description}
	if ev.threeDS {
		if pay.NextAction == nil || pay.NextAction.Type != "threeds_redirect" {
			return nil, fmt.Errorf("expected a 3-D Secure challenge, got transactionStatusId %d", pay.TransactionStatusID)
		}
		if err := approveChallenge(ctx, client, base, pay.NextAction.URL); err != nil {
			return nil, err
		}
		var st struct {
			TransactionStatusID int             `json:"transactionStatusId"`
			LastLog             json.RawMessage `json:"lastLog"`
		}
		if err := callAPI(ctx, client, http.MethodGet, fmt.Sprintf("%s/payment-requests/status/%d", base, pay.PaymentRequestID), apiKey, nil, &st); err != nil {
			return nil, err
		}
		res.TransactionStatusID, res.LastLog = st.TransactionStatusID, st.LastLog
	}
	return res, nil
}

// callAPI sends one request to the public API; a non-2xx answer is an error
// carrying the problem's detail.
func callAPI(ctx context.Context, client *http.Client, method, u, apiKey string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", apiKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, strings.SplitN(u, "?", 2)[0], resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	return nil
}

var approveLink = regexp.MustCompile(`id="approve" href="([^"]+)"`)

// approveChallenge does what the payer does on the sandbox's 3-D Secure page:
// open it and follow its Approve link (a pre-signed provider callback).
func approveChallenge(ctx context.Context, client *http.Client, base, challenge string) error {
	page, err := url.Parse(base + "/")
	if err != nil {
		return err
	}
	if page, err = page.Parse(challenge); err != nil {
		return fmt.Errorf("challenge URL: %w", err)
	}
	html1, err := get(ctx, client, page.String())
	if err != nil {
		return fmt.Errorf("open the 3-D Secure page: %w", err)
	}
	m := approveLink.FindSubmatch(html1)
	if m == nil {
		return errors.New("the 3-D Secure page has no Approve link")
	}
	approve, err := page.Parse(html.UnescapeString(string(m[1])))
	if err != nil {
		return err
	}
	if _, err := get(ctx, client, approve.String()); err != nil {
		return fmt.Errorf("approve the 3-D Secure challenge: %w", err)
	}
	return nil
}

// get fetches a payer page; a redirect (to the result) is a success.
func get(ctx context.Context, client *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return b, nil
}
