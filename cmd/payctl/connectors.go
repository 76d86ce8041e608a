package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// connectorView is what payctl prints of an account: settings and masks,
// never a secret.
type connectorView struct {
	MerchantID string                 `json:"merchantId"`
	Name       string                 `json:"name"`
	Kind       acquireraccount.Kind   `json:"kind"`
	Status     acquireraccount.Status `json:"status"`
	Live       bool                   `json:"live"`
	Settings   map[string]string      `json:"settings"`
	Masked     map[string]string      `json:"masked"`
	CheckedAt  time.Time              `json:"checkedAt"`
	CreatedAt  time.Time              `json:"createdAt"`
	UpdatedAt  time.Time              `json:"updatedAt"`
	Version    int64                  `json:"version"`
	// WebhookURL is where the acquirer must send the account's events:
	// the merchant registers it in its own account (show and list).
	WebhookURL string `json:"webhookUrl,omitempty"`
}

// withWebhook sets v's webhook address under the API's base URL.
func withWebhook(v connectorView, apiBase string, a *acquireraccount.Account) connectorView {
	if p := acquireraccount.WebhookPath(a); p != "" && apiBase != "" {
		v.WebhookURL = strings.TrimSuffix(apiBase, "/") + p
	}
	return v
}

func connectorViewOf(a *acquireraccount.Account) connectorView {
	settings, masks := a.Settings, a.Masks
	if settings == nil {
		settings = map[string]string{}
	}
	if masks == nil {
		masks = map[string]string{}
	}
	return connectorView{MerchantID: a.MerchantID, Name: a.Name, Kind: a.Kind, Status: a.Status, Live: a.Live, Settings: settings,
		Masked: masks, CheckedAt: a.CheckedAt, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, Version: a.Version}
}

const connectorsLong = `connectors manages a merchant's own acquirer accounts. A merchant without
one charges through the platform's connectors.

Kinds and their fields (a JSON object in --values-file, "-" for stdin; the
secrets never go on the command line):
  stripe  secretKey (sk_test_…, sk_live_…, rk_…), webhookSecret (whsec_…)
  adyen   apiKey, hmacKey (hex), merchantAccount, environment (test|live),
          livePrefix (required when live)

add and replace save an account only after a harmless call with its
credentials succeeded (Stripe: read the balance; Adyen: list payment
methods). Test credentials serve sandbox merchants only, live ones
production merchants only. Secrets are sealed at rest and never printed
again: list and show print their masks. Every change is written with an
entry in the merchant's audit log.`

func connectorsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "connectors",
		Short: "Connect, check, list and disable a merchant's own acquirer accounts",
		Long:  connectorsLong,
		Example: `  payctl --local connectors add --merchant mer_... --name eustripe --kind stripe --values-file stripe.json
  payctl --local connectors list --merchant mer_...
  payctl --local connectors disable --merchant mer_... --name eustripe`,
	}
	var merchantID, name, kind, valuesFile string
	var apis paywire.AccountAPIs
	service := func(ctx context.Context) (*acquireraccount.Service, error) {
		e, err := connect(ctx, *g)
		if err != nil {
			return nil, err
		}
		return paywire.AccountService(e.store, e.sealer, apis), nil
	}
	needMerchant := func(f *cobra.Command, withName bool) {
		f.Flags().StringVar(&merchantID, "merchant", "", "the merchant's id (required)")
		_ = f.MarkFlagRequired("merchant")
		if withName {
			f.Flags().StringVar(&name, "name", "", "the account's name (required)")
			_ = f.MarkFlagRequired("name")
		}
	}
	withAPIs := func(f *cobra.Command) {
		f.Flags().StringVar(&apis.StripeAPIBase, "stripe-api-base", "", "Stripe's API address (a test double such as stripe-mock)")
		f.Flags().StringVar(&apis.AdyenBaseURL, "adyen-api-base", "", "Adyen's Checkout API root (a test double such as Prism)")
		_ = f.Flags().MarkHidden("stripe-api-base")
		_ = f.Flags().MarkHidden("adyen-api-base")
	}
	save := func(replace bool) func(cmd *cobra.Command, _ []string) error {
		return func(cmd *cobra.Command, args []string) error {
			values, err := readValues(valuesFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return jsonCommand(func(ctx context.Context) (any, error) {
				s, err := service(ctx)
				if err != nil {
					return nil, err
				}
				in := acquireraccount.Input{MerchantID: merchantID, Name: name, Kind: acquireraccount.Kind(kind), Values: values}
				var a *acquireraccount.Account
				if replace {
					a, err = s.Replace(ctx, "payctl", in)
				} else {
					a, err = s.Add(ctx, "payctl", in)
				}
				if err != nil {
					return nil, err
				}
				return connectorViewOf(a), nil
			})(cmd, args)
		}
	}
	add := &cobra.Command{
		Use:     "add --merchant ID --name NAME --kind stripe|adyen --values-file FILE",
		Short:   "Connect an account after checking its credentials",
		Example: "  payctl --local connectors add --merchant mer_... --name eustripe --kind stripe --values-file stripe.json",
		RunE:    save(false),
	}
	replace := &cobra.Command{
		Use:     "replace --merchant ID --name NAME --kind stripe|adyen --values-file FILE",
		Short:   "Give an account new credentials (a rotated key), checked first",
		Example: "  payctl --local connectors replace --merchant mer_... --name eustripe --kind stripe --values-file rotated.json",
		RunE:    save(true),
	}
	for _, cmd := range []*cobra.Command{add, replace} {
		needMerchant(cmd, true)
		withAPIs(cmd)
		cmd.Flags().StringVar(&kind, "kind", "", "stripe or adyen (required)")
		cmd.Flags().StringVar(&valuesFile, "values-file", "", `JSON object of the kind's fields; "-" reads stdin (required)`)
		_ = cmd.MarkFlagRequired("kind")
		_ = cmd.MarkFlagRequired("values-file")
	}
	list := &cobra.Command{
		Use:     "list --merchant ID",
		Short:   "List a merchant's accounts (masked)",
		Example: "  payctl --local connectors list --merchant mer_...",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			accounts, err := e.store.Connectors(ctx, merchantID)
			if err != nil {
				return nil, err
			}
			views := make([]connectorView, 0, len(accounts))
			for _, a := range accounts {
				views = append(views, withWebhook(connectorViewOf(a), e.apiBase, a))
			}
			return map[string]any{"connectors": views}, nil
		}),
	}
	needMerchant(list, false)
	show := &cobra.Command{
		Use:     "show --merchant ID --name NAME",
		Short:   "Show one account (masked)",
		Example: "  payctl --local connectors show --merchant mer_... --name eustripe",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			a, err := e.store.Connector(ctx, merchantID, name)
			if err != nil {
				return nil, err
			}
			return withWebhook(connectorViewOf(a), e.apiBase, a), nil
		}),
	}
	needMerchant(show, true)
	test := &cobra.Command{
		Use:     "test --merchant ID --name NAME",
		Short:   "Check a saved account's credentials again with a harmless call",
		Example: "  payctl --local connectors test --merchant mer_... --name eustripe",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			s, err := service(ctx)
			if err != nil {
				return nil, err
			}
			a, err := s.Test(ctx, "payctl", merchantID, name)
			if err != nil {
				return nil, err
			}
			return connectorViewOf(a), nil
		}),
	}
	needMerchant(test, true)
	withAPIs(test)
	status := func(use, short string, st acquireraccount.Status) *cobra.Command {
		cmd := &cobra.Command{
			Use:     use + " --merchant ID --name NAME",
			Short:   short,
			Example: "  payctl --local connectors " + use + " --merchant mer_... --name eustripe",
			RunE: jsonCommand(func(ctx context.Context) (any, error) {
				s, err := service(ctx)
				if err != nil {
					return nil, err
				}
				a, err := s.SetStatus(ctx, "payctl", merchantID, name, st)
				if err != nil {
					return nil, err
				}
				return connectorViewOf(a), nil
			}),
		}
		needMerchant(cmd, true)
		return cmd
	}
	c.AddCommand(add, replace, list, show, test,
		status("disable", "Stop routing to an account (its payments keep their connector)", acquireraccount.Disabled),
		status("enable", "Route to a disabled account again", acquireraccount.Active))
	return c
}

// readValues reads the JSON object of an account's fields from path ("-"
// is stdin). A value that is not a string is a usage error.
func readValues(path string, stdin io.Reader) (map[string]string, error) {
	var raw []byte
	var err error
	if path == "-" {
		raw, err = io.ReadAll(io.LimitReader(stdin, 64<<10))
	} else {
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageError("--values-file: " + err.Error())
	}
	var values map[string]string
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, usageError(fmt.Sprintf("--values-file: a JSON object of strings: %v", err))
	}
	return values, nil
}
