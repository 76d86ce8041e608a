package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/webhook"
)

// merchantView is what payctl prints: settings, never a stored secret.
type merchantView struct {
	ID                 string          `json:"id"`
	Name               string          `json:"name"`
	Sandbox            bool            `json:"sandbox"`
	NotifyURL          string          `json:"notifyUrl,omitempty"`
	SuccessURL         string          `json:"successUrl,omitempty"`
	FailureURL         string          `json:"failureUrl,omitempty"`
	AllowedOrigins     []string        `json:"allowedOrigins"`
	Methods            []int           `json:"methods"`
	Limits             merchant.Limits `json:"limits"`
	RateLimitPerMinute int             `json:"rateLimitPerMinute"`
	NotificationFormat string          `json:"notificationFormat"`
	APIKeyPrefix       string          `json:"apiKeyPrefix"`
	// The key rotated out while it still works (rotate-key --overlap).
	PreviousAPIKeyPrefix string     `json:"previousApiKeyPrefix,omitempty"`
	PreviousAPIKeyUntil  *time.Time `json:"previousApiKeyUntil,omitempty"`
	CreatedAt            time.Time  `json:"createdAt"`
	UpdatedAt            time.Time  `json:"updatedAt"`
	Version              int64      `json:"version"`

	// Shown once, on create and rotate-key only.
	APIKey        string `json:"apiKey,omitempty"`
	WebhookSecret string `json:"webhookSecret,omitempty"`
	Notice        string `json:"notice,omitempty"`
}

func viewOf(m *merchant.Merchant) merchantView {
	format := m.NotificationFormat
	if format == "" {
		format = "form"
	}
	v := merchantView{ID: m.ID, Name: m.Name, Sandbox: m.Sandbox, NotifyURL: m.NotifyURL, SuccessURL: m.SuccessURL,
		FailureURL: m.FailureURL, AllowedOrigins: nonNil(m.AllowedOrigins), Methods: nonNilInts(m.Methods), Limits: m.Limits,
		RateLimitPerMinute: m.RateLimit(), NotificationFormat: format, APIKeyPrefix: m.APIKeyPrefix,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Version: m.Version}
	if m.PreviousAPIKeyLive(time.Now()) {
		until := m.PrevAPIKeyUntil
		v.PreviousAPIKeyPrefix, v.PreviousAPIKeyUntil = m.PrevAPIKeyPrefix, &until
	}
	return v
}

const shownOnce = "The API key and webhook secret are shown only now; store them in your secret manager."

const settingsHelp = `Settings (create and update; update changes only the flags given):
  --name, --notify-url, --success-url, --failure-url
  --allowed-origins O1,O2   origins allowed to embed the checkout
  --methods 1,27,30         enabled host-to-host method selectors
  --min-amount, --max-amount, --daily-amount, --monthly-amount   decimal limits ("" removes one)
  --daily-count, --monthly-count                                 count limits
  --currencies EUR,USD, --countries DE,FR                        allowed lists
  --rate-limit N            API requests per minute (default 100)
  --notification-format form|json`

func merchantCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "merchant",
		Short: "Create, list, show and update merchants; rotate their API keys",
		Long:  "merchant manages merchants: their settings and their API key. Stored secrets are never printed; a new key and webhook secret are shown once.",
		Example: `  payctl --local merchant list
  payctl --local merchant create --name "Acme Books" --notify-url https://acme.example/hooks
  payctl --local merchant show --id mer_...`,
	}

	var production bool
	var create *settings
	createCmd := &cobra.Command{
		Use:   "create --name NAME [settings]",
		Short: "Create a merchant; prints its API key and webhook secret once",
		Long:  "create adds a merchant (a sandbox one on a sandbox stack) and prints its API key and webhook secret: they are shown only now.\n\n" + settingsHelp,
		Example: `  payctl --local merchant create --name "Acme Books" --notify-url https://acme.example/hooks \
    --allowed-origins https://acme.example --max-amount 500.00 --currencies EUR,USD`,
	}
	create = bindSettings(createCmd.Flags())
	createCmd.Flags().BoolVar(&production, "production", false, "create a live (non-sandbox) merchant; needs a production stack")
	createCmd.RunE = jsonCommand(func(ctx context.Context) (any, error) {
		e, err := connect(ctx, *g)
		if err != nil {
			return nil, err
		}
		if production && e.sandbox {
			return nil, errors.New("--production needs a production stack")
		}
		now := time.Now().UTC()
		m := &merchant.Merchant{ID: merchant.NewID(), Sandbox: e.sandbox, CreatedAt: now, UpdatedAt: now}
		if e.sandbox {
			m.Methods = merchant.AllSelectors()
		}
		if err := create.apply(createCmd.Flags(), m); err != nil {
			return nil, err
		}
		if err := m.Validate(); err != nil {
			return nil, err
		}
		key, secret, err := newSecrets(e, m)
		if err != nil {
			return nil, err
		}
		if err := e.store.CreateMerchant(ctx, m); err != nil {
			return nil, err
		}
		v := viewOf(m)
		v.APIKey, v.WebhookSecret, v.Notice = key, secret, shownOnce
		return v, nil
	})

	listCmd := &cobra.Command{
		Use:     "list",
		Short:   "List every merchant (settings, never a secret)",
		Long:    "list prints every merchant of the stack, sorted by creation time, as a JSON object {\"merchants\": [...]} of the same views as show.",
		Example: "  payctl --local merchant list\n  payctl --local merchant list | jq -r '.merchants[] | .id + \" \" + .name'",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			ms, err := e.store.Merchants(ctx)
			if err != nil {
				return nil, err
			}
			sort.SliceStable(ms, func(i, k int) bool { return ms[i].CreatedAt.Before(ms[k].CreatedAt) })
			out := struct {
				Merchants []merchantView `json:"merchants"`
			}{Merchants: []merchantView{}}
			for _, m := range ms {
				out.Merchants = append(out.Merchants, viewOf(m))
			}
			return out, nil
		}),
	}

	var showID string
	showCmd := &cobra.Command{
		Use:     "show --id ID",
		Short:   "Show a merchant's settings (never a secret)",
		Example: "  payctl --local merchant show --id mer_...",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			if showID == "" {
				return nil, usageError("--id is required")
			}
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			m, err := load(ctx, e, showID)
			if err != nil {
				return nil, err
			}
			return viewOf(m), nil
		}),
	}
	showCmd.Flags().StringVar(&showID, "id", "", "merchant id")

	var updateID string
	updateCmd := &cobra.Command{
		Use:     "update --id ID [settings]",
		Short:   "Change a merchant's settings (only the flags given)",
		Long:    "update changes the settings given and leaves the others; concurrent updates never overwrite each other.\n\n" + settingsHelp,
		Example: "  payctl --local merchant update --id mer_... --notify-url https://acme.example/v2 --max-amount 500",
	}
	update := bindSettings(updateCmd.Flags())
	updateCmd.Flags().StringVar(&updateID, "id", "", "merchant id")
	updateCmd.RunE = jsonCommand(func(ctx context.Context) (any, error) {
		if updateID == "" {
			return nil, usageError("--id is required")
		}
		e, err := connect(ctx, *g)
		if err != nil {
			return nil, err
		}
		v, err := updateMerchant(ctx, e, updateID, func(m *merchant.Merchant) error {
			if err := update.apply(updateCmd.Flags(), m); err != nil {
				return err
			}
			return m.Validate()
		})
		if err != nil {
			return nil, err
		}
		var changed []string
		updateCmd.Flags().Visit(func(f *pflag.Flag) {
			if f.Name != "id" && updateCmd.InheritedFlags().Lookup(f.Name) == nil { // not --local, --state-dir...
				changed = append(changed, "--"+f.Name)
			}
		})
		return v, auditPayctl(ctx, e, updateID, "settings.update", "payctl merchant update "+strings.Join(changed, " "))
	})

	var rotateID, rotateOverlap string
	rotateCmd := &cobra.Command{
		Use:   "rotate-key --id ID [--overlap none|1h|24h|7d]",
		Short: "Give a merchant a new API key (shown once); the old one may keep working for an overlap",
		Long: "rotate-key replaces the merchant's API key and prints the new one once. With --overlap 1h, 24h or 7d the old key keeps working " +
			"until then (a previous key still in its overlap ends at once); end it early with end-previous-key. Without an overlap the old key " +
			"stops working within 30 seconds (API instances cache keys that long).",
		Example: "  payctl --local merchant rotate-key --id mer_... --overlap 24h",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			if rotateID == "" {
				return nil, usageError("--id is required")
			}
			overlap, err := merchant.ParseOverlap(rotateOverlap)
			if err != nil {
				return nil, usageError("--overlap: " + err.Error())
			}
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			var key string
			now := time.Now().UTC()
			v, err := updateMerchant(ctx, e, rotateID, func(m *merchant.Merchant) error {
				if overlap > 0 {
					if err := e.store.PutPreviousAPIKey(ctx, m.ID, m.APIKeyHash, now.Add(overlap)); err != nil {
						return err
					}
				}
				key = merchant.NewAPIKey(m.Sandbox)
				m.RotateAPIKey(key, e.sealer.Seal(key, m.ID), overlap, now)
				return nil
			})
			if err != nil {
				return nil, err
			}
			detail := "API key replaced by " + merchant.KeyPrefix(key) + "…; no overlap"
			v.Notice = "The new API key is shown only now. The old key stops working within 30 seconds (API instances cache keys that long)."
			if overlap > 0 {
				detail = fmt.Sprintf("API key replaced by %s…; the old key works until %s (--overlap %s)", merchant.KeyPrefix(key),
					v.PreviousAPIKeyUntil.Format("2006-01-02 15:04 MST"), rotateOverlap)
				v.Notice = "The new API key is shown only now. The old key keeps working until previousApiKeyUntil; end it early with payctl merchant end-previous-key."
			}
			if err := auditPayctl(ctx, e, rotateID, "apikey.rotate", detail); err != nil {
				return nil, err
			}
			v.APIKey = key
			return v, nil
		}),
	}
	rotateCmd.Flags().StringVar(&rotateID, "id", "", "merchant id")
	rotateCmd.Flags().StringVar(&rotateOverlap, "overlap", "none", "how long the old key keeps working: none, 1h, 24h or 7d")

	var endID string
	endCmd := &cobra.Command{
		Use:     "end-previous-key --id ID",
		Short:   "End the overlap of a rotated-out API key now",
		Long:    "end-previous-key stops the merchant's previous API key (kept working by rotate-key --overlap) now; API instances that just used it accept it for at most 30 seconds more.",
		Example: "  payctl --local merchant end-previous-key --id mer_...",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			if endID == "" {
				return nil, usageError("--id is required")
			}
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			var ended string
			v, err := updateMerchant(ctx, e, endID, func(m *merchant.Merchant) error {
				ended = ""
				if m.PreviousAPIKeyLive(time.Now()) {
					ended = m.PrevAPIKeyPrefix
				}
				m.EndPreviousAPIKey()
				return nil
			})
			if err != nil {
				return nil, err
			}
			if ended == "" {
				v.Notice = "No previous API key was working."
				return v, nil
			}
			v.Notice = "The previous key is refused from now on (within 30 seconds where an API instance had just used it)."
			return v, auditPayctl(ctx, e, endID, "apikey.end-previous", "previous API key "+ended+"… ended early")
		}),
	}
	endCmd.Flags().StringVar(&endID, "id", "", "merchant id")

	c.AddCommand(createCmd, listCmd, showCmd, updateCmd, rotateCmd, endCmd, checkOriginsCmd(g), userCmd(g))
	return c
}

func newSecrets(e *env, m *merchant.Merchant) (key, secret string, err error) {
	key = merchant.NewAPIKey(m.Sandbox)
	if secret, err = webhook.NewWebhookSecret(); err != nil {
		return "", "", err
	}
	m.APIKeyHash, m.APIKeyPrefix = merchant.HashAPIKey(key), merchant.KeyPrefix(key)
	m.SealedAPIKey, m.SealedSecret = e.sealer.Seal(key, m.ID), e.sealer.Seal(secret, m.ID)
	return key, secret, nil
}

func load(ctx context.Context, e *env, id string) (*merchant.Merchant, error) {
	m, err := e.store.Merchant(ctx, id)
	if errkind.Is(err, errkind.NotFound) {
		return nil, fmt.Errorf("merchant %s not found", id)
	}
	return m, err
}

// updateMerchant applies change with optimistic locking, retrying on a
// concurrent update so two operators never overwrite each other.
func updateMerchant(ctx context.Context, e *env, id string, change func(*merchant.Merchant) error) (merchantView, error) {
	for attempt := 0; attempt < 5; attempt++ {
		m, err := load(ctx, e, id)
		if err != nil {
			return merchantView{}, err
		}
		if err := change(m); err != nil {
			return merchantView{}, err
		}
		m.UpdatedAt = time.Now().UTC()
		err = e.store.UpdateMerchant(ctx, m)
		if errkind.Is(err, errkind.Conflict) {
			continue
		}
		if err != nil {
			return merchantView{}, err
		}
		return viewOf(m), nil
	}
	return merchantView{}, errors.New("merchant changed concurrently too often; retry")
}

// settings are the flags shared by create and update; only flags the
// operator actually set are applied.
type settings struct {
	name, notifyURL, successURL, failureURL, origins, methods      *string
	minAmount, maxAmount, dailyAmount, monthlyAmount, currs, ctrys *string
	dailyCount, monthlyCount                                       *int64
	rateLimit                                                      *int
	format                                                         *string
}

func bindSettings(fs *pflag.FlagSet) *settings {
	return &settings{
		name: fs.String("name", "", "merchant name"), notifyURL: fs.String("notify-url", "", "where notifications are sent"),
		successURL: fs.String("success-url", "", "payer's return URL after an approval"),
		failureURL: fs.String("failure-url", "", "payer's return URL after a decline"),
		origins:    fs.String("allowed-origins", "", "origins allowed to embed the checkout, comma-separated"),
		methods:    fs.String("methods", "", "enabled host-to-host method selectors, comma-separated"),
		minAmount:  fs.String("min-amount", "", "smallest amount (decimal)"), maxAmount: fs.String("max-amount", "", "largest amount (decimal)"),
		dailyAmount: fs.String("daily-amount", "", "daily amount limit (decimal)"), monthlyAmount: fs.String("monthly-amount", "", "monthly amount limit (decimal)"),
		currs: fs.String("currencies", "", "allowed currencies, comma-separated"), ctrys: fs.String("countries", "", "allowed payer countries, comma-separated"),
		dailyCount: fs.Int64("daily-count", 0, "daily payment count limit"), monthlyCount: fs.Int64("monthly-count", 0, "monthly payment count limit"),
		rateLimit: fs.Int("rate-limit", 0, "API requests per minute (default 100)"),
		format:    fs.String("notification-format", "", "form or json"),
	}
}

func (s *settings) apply(fs *pflag.FlagSet, m *merchant.Merchant) error {
	var err error
	fs.Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		switch f.Name {
		case "name":
			m.Name = *s.name
		case "notify-url":
			m.NotifyURL = *s.notifyURL
		case "success-url":
			m.SuccessURL = *s.successURL
		case "failure-url":
			m.FailureURL = *s.failureURL
		case "allowed-origins":
			m.AllowedOrigins = nil
			for _, o := range splitList(*s.origins) {
				n, e := merchant.NormalizeOrigin(o, m.Sandbox)
				if e != nil {
					err = fmt.Errorf("--allowed-origins: %w", e)
					return
				}
				m.AllowedOrigins = append(m.AllowedOrigins, n)
			}
		case "methods":
			m.Methods = nil
			for _, p := range splitList(*s.methods) {
				n, e := strconv.Atoi(p)
				if e != nil {
					err = fmt.Errorf("--methods: %q is not a number", p)
					return
				}
				m.Methods = append(m.Methods, n)
			}
		case "min-amount":
			m.Limits.MinAmount, err = decimalFlag(f.Name, *s.minAmount)
		case "max-amount":
			m.Limits.MaxAmount, err = decimalFlag(f.Name, *s.maxAmount)
		case "daily-amount":
			m.Limits.DailyAmount, err = decimalFlag(f.Name, *s.dailyAmount)
		case "monthly-amount":
			m.Limits.MonthlyAmount, err = decimalFlag(f.Name, *s.monthlyAmount)
		case "currencies":
			m.Limits.Currencies = splitList(*s.currs)
		case "countries":
			m.Limits.Countries = splitList(*s.ctrys)
		case "daily-count":
			m.Limits.DailyCount = *s.dailyCount
		case "monthly-count":
			m.Limits.MonthlyCount = *s.monthlyCount
		case "rate-limit":
			m.RateLimitPerMinute = *s.rateLimit
		case "notification-format":
			m.NotificationFormat = *s.format
		}
	})
	return err
}

// decimalFlag parses a limit; an empty value removes the limit.
func decimalFlag(name, v string) (*decimal.Decimal, error) {
	if v == "" {
		return nil, nil
	}
	d, err := decimal.NewFromString(v)
	if err != nil {
		return nil, fmt.Errorf("--%s: %q is not a decimal number", name, v)
	}
	return &d, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// invalidOrigin is a stored allowed origin that today's rules refuse.
type invalidOrigin struct {
	MerchantID string `json:"merchantId"`
	Sandbox    bool   `json:"sandbox"`
	Origin     string `json:"origin"`
	Problem    string `json:"problem"`
}

// checkOriginsCmd lists every merchant's stored allowed origins that the
// origin rules refuse (values saved before them): such a value is never
// written into a header; the operator corrects it with merchant update.
func checkOriginsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "check-origins",
		Short: "List stored allowed origins that are not valid origins, with their merchant",
		Long: "check-origins reads every merchant and lists each stored allowed origin that the origin rules refuse " +
			"(a scheme, a host of letters, digits, dots and hyphens, an optional port, nothing else; https only outside the sandbox). " +
			"The service leaves such a value out of every header. Fix one with 'merchant update --id ID --allowed-origins ...'. " +
			"Exit code 3 when any is found.",
		Example: "  payctl --local merchant check-origins\n  payctl --stack payreq-production merchant check-origins | jq -r '.invalid[] | .merchantId + \" \" + .origin'",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), commandTimeout)
			defer cancel()
			e, err := connect(ctx, *g)
			if err != nil {
				return err
			}
			ms, err := e.store.Merchants(ctx)
			if err != nil {
				return err
			}
			sort.SliceStable(ms, func(i, k int) bool { return ms[i].CreatedAt.Before(ms[k].CreatedAt) })
			out := struct {
				Checked int             `json:"merchantsChecked"`
				Invalid []invalidOrigin `json:"invalid"`
			}{Checked: len(ms), Invalid: []invalidOrigin{}}
			for _, m := range ms {
				for _, oe := range merchant.InvalidOrigins(m) {
					out.Invalid = append(out.Invalid, invalidOrigin{MerchantID: m.ID, Sandbox: m.Sandbox, Origin: oe.Origin, Problem: oe.Error()})
				}
			}
			if err := printJSON(cmd.OutOrStdout(), out); err != nil {
				return err
			}
			if len(out.Invalid) > 0 {
				return exitError{code: exitViolations, msg: fmt.Sprintf("%d stored allowed origin(s) are not valid origins", len(out.Invalid))}
			}
			return nil
		},
	}
}
