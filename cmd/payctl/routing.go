package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/routing"
)

// routingView is what payctl routing prints.
type routingView struct {
	MerchantID string        `json:"merchantId"`
	Routing    routing.Rules `json:"routing"`
	Version    int64         `json:"version"` // the merchant record's
	Changed    bool          `json:"changed"` // set only: false when the rules were already these
}

const routingHelp = `The rules file is JSON (docs/acquirers.md, "Routing"):
  {"rules": [
     {"name": "large EUR cards", "methods": ["card"], "currencies": ["EUR"], "minAmount": "500.00", "connector": "adyen"},
     {"cardBrands": ["amex"], "split": [{"connector": "stripe", "weight": 80}, {"connector": "adyen", "weight": 20}]}
   ],
   "default": "stripe", "failover": ["adyen"]}
The first rule whose conditions all hold picks the connector; "default" (or, without it, the stage's
default connector) takes the rest. Amounts are decimal strings. "failover" (on a rule, or beside
"default") lists connectors to try, in order, when the picked one did not process the charge
(docs/acquirers.md, "Failover"). {"rules": []} removes the routing.`

func routingCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "routing",
		Short: "Show and set a merchant's connector routing rules",
		Long:  "routing manages the rules that pick the acquirer connection (connector) of each payment attempt of a merchant.\n\n" + routingHelp,
		Example: `  payctl --local routing show --merchant mer_...
  payctl --local routing set --merchant mer_... --file rules.json`,
	}
	var showID string
	show := &cobra.Command{
		Use:     "show --merchant ID",
		Short:   "Print a merchant's routing rules",
		Example: "  payctl --local routing show --merchant mer_...",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			if showID == "" {
				return nil, usageError("--merchant is required")
			}
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			m, err := load(ctx, e, showID)
			if err != nil {
				return nil, err
			}
			return routingView{MerchantID: m.ID, Routing: nonNilRules(m.Routing), Version: m.Version}, nil
		}),
	}
	show.Flags().StringVar(&showID, "merchant", "", "merchant id")

	var setID, file string
	set := &cobra.Command{
		Use:   "set --merchant ID --file rules.json",
		Short: "Replace a merchant's routing rules (validated; '-' reads stdin)",
		Long:  "set validates the rules file and replaces the merchant's rules with it in one conditional write; setting the rules the merchant already has writes nothing.\n\n" + routingHelp,
		Example: `  payctl --local routing set --merchant mer_... --file rules.json
  echo '{"rules": []}' | payctl --local routing set --merchant mer_... --file -`,
	}
	set.Flags().StringVar(&setID, "merchant", "", "merchant id")
	set.Flags().StringVar(&file, "file", "", "the rules (JSON); - for stdin")
	set.RunE = func(cmd *cobra.Command, _ []string) error {
		if setID == "" || file == "" {
			return usageError("--merchant and --file are required")
		}
		var in io.Reader = cmd.InOrStdin()
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		rules, err := parseRules(in)
		if err != nil {
			return err
		}
		return jsonCommand(func(ctx context.Context) (any, error) {
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			v, err := setRouting(ctx, e, setID, rules)
			if err != nil || !v.Changed {
				return v, err
			}
			return v, auditPayctl(ctx, e, setID, "routing.set", fmt.Sprintf("payctl routing set: %d rules", len(rules.Rules)))
		})(cmd, nil)
	}
	c.AddCommand(show, set)
	return c
}

// parseRules reads and validates a rules file: unknown fields are errors
// (a misspelt condition would otherwise match everything), as is anything
// after the JSON object.
func parseRules(in io.Reader) (routing.Rules, error) {
	b, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return routing.Rules{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r routing.Rules
	if err := dec.Decode(&r); err != nil {
		return routing.Rules{}, fmt.Errorf("rules file: %w", err)
	}
	if dec.More() {
		return routing.Rules{}, errors.New("rules file: more than one JSON value")
	}
	if err := r.Validate(); err != nil {
		return routing.Rules{}, err
	}
	return r, nil
}

// setRouting replaces merchant id's rules with rules, conditional on the
// merchant record's version (every write is); a concurrent change makes it
// read again. Rules equal to the stored ones write nothing, so the same
// update sent many times at once ends in one write of one configuration.
func setRouting(ctx context.Context, e *env, id string, rules routing.Rules) (routingView, error) {
	for try := 0; try < 10; try++ {
		m, err := load(ctx, e, id)
		if err != nil {
			return routingView{}, err
		}
		if m.Routing.Equal(rules) {
			return routingView{MerchantID: m.ID, Routing: nonNilRules(m.Routing), Version: m.Version}, nil
		}
		m.Routing, m.UpdatedAt = rules, time.Now().UTC()
		err = e.store.UpdateMerchant(ctx, m)
		if errkind.Is(err, errkind.Conflict) {
			continue
		}
		if err != nil {
			return routingView{}, err
		}
		return routingView{MerchantID: m.ID, Routing: nonNilRules(m.Routing), Version: m.Version, Changed: true}, nil
	}
	return routingView{}, errors.New("merchant changed concurrently too often; retry")
}

func nonNilRules(r routing.Rules) routing.Rules {
	if r.Rules == nil {
		r.Rules = []routing.Rule{}
	}
	return r
}
