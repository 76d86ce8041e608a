package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/errkind"
)

// userCmd: `merchant user add --id ID --email E [--role admin|member]`
// creates a dashboard user of the merchant (or, for an existing one, a new
// link) and prints the one-time link that sets its password.
func userCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "user",
		Short:   "Manage a merchant's dashboard users",
		Long:    "user invites people to the merchant dashboard at /dashboard: each gets a one-time link to set a password.",
		Example: "  payctl --local merchant user add --id mer_... --email ana@acme.example",
	}
	var id, email, role, baseURL string
	add := &cobra.Command{
		Use:   "add --id ID --email E [--role admin|member] [--base-url URL]",
		Short: "Invite a dashboard user; prints a one-time set-password link",
		Long:  "add creates a dashboard user of the merchant (or, for an existing one, a new link) and prints the one-time link that sets its password. The link works once and expires after " + dashboard.InviteTTL.String() + ".",
		Example: `  payctl --local merchant user add --id mer_... --email ana@acme.example
  payctl merchant user add --id mer_... --email ops@acme.example --role member --base-url https://pay.example`,
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			if id == "" || email == "" {
				return nil, usageError("--id and --email are required")
			}
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			if _, err := load(ctx, e, id); err != nil {
				return nil, err
			}
			base := baseURL
			if base == "" {
				if base = e.apiBase; base == "" {
					return nil, errors.New("the stack's API URL is unknown: pass --base-url")
				}
			}
			link, until, err := dashboard.InviteUser(ctx, e.store, func(err error) bool { return errkind.Is(err, errkind.NotFound) },
				id, email, role, "payctl", base, time.Now())
			if err != nil {
				return nil, err
			}
			return map[string]any{"merchantId": id, "email": email, "role": role, "setPasswordUrl": link,
				"expiresIn": dashboard.InviteTTL.String(), "expiresAt": until.UTC().Format(time.RFC3339),
				"notice": "The link is shown only now and works once, until expiresAt; a newer link for the same user voids it. " +
					"Send it to the user over a channel you trust."}, nil
		}),
	}
	add.Flags().StringVar(&id, "id", "", "merchant id")
	add.Flags().StringVar(&email, "email", "", "the user's e-mail address")
	add.Flags().StringVar(&role, "role", dashboard.RoleAdmin, "admin or member")
	add.Flags().StringVar(&baseURL, "base-url", "", "public base URL of the API (default: the stack's)")
	c.AddCommand(add)
	c.AddCommand(&cobra.Command{
		Use:   "migrate",
		Short: "Move dashboard users stored before per-merchant identities to their merchant's key",
		Long: "migrate moves every dashboard user stored under its address alone (one merchant per address, before 2026-11) " +
			"to its merchant's key, keeping password, second factor and sessions. Run it once after deploying; it is idempotent.",
		Example: "  payctl merchant user migrate",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			n, err := e.store.MigrateDashboardUsers(ctx)
			if err != nil {
				return nil, err
			}
			return map[string]any{"moved": n}, nil
		}),
	})
	return c
}

// auditPayctl records an operator's change in the merchant's audit log,
// which the merchant's admins read in the dashboard.
func auditPayctl(ctx context.Context, e *env, merchantID, action, detail string) error {
	return dashboard.Record(ctx, e.store, merchantID, "payctl", action, detail, time.Now())
}
