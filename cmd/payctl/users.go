package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
)

// userCmd manages the dashboard's people: `merchant user add` invites an
// address to a merchant, `reset` gives a person a link to set a new
// password, `migrate` turns users stored per merchant into identities.
func userCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "user",
		Short: "Manage the people of the merchant dashboard",
		Long: "user invites people to a merchant's dashboard at /dashboard (each person is one identity per e-mail address, " +
			"with a membership and role at each merchant), resets a person's password, and migrates users stored per merchant.",
		Example: "  payctl --local merchant user add --id mer_... --email ana@acme.example",
	}
	var id, email, role, baseURL string
	add := &cobra.Command{
		Use:   "add --id ID --email E [--role admin|member] [--base-url URL]",
		Short: "Invite an address to a merchant; prints a one-time link",
		Long: "add invites the address to the merchant with a role and prints the invitation's one-time link, which works once and expires after " +
			dashboard.InviteTTL.String() + ". A new person sets a password through it; a person who already signs in to the dashboard accepts it signed in " +
			"(the link's page and their list of merchants say so). Inviting again while the invitation is open voids the earlier link.",
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
			base, err := linkBase(e, baseURL)
			if err != nil {
				return nil, err
			}
			link, until, err := dashboard.InviteUser(ctx, e.store, id, email, role, "payctl", base, time.Now())
			if err != nil {
				return nil, err
			}
			return map[string]any{"merchantId": id, "email": email, "role": role, "setPasswordUrl": link,
				"expiresIn": dashboard.InviteTTL.String(), "expiresAt": until.UTC().Format(time.RFC3339),
				"notice": "The link is shown only now and works once, until expiresAt; a newer invitation of the same address voids it. " +
					"Send it to the person over a channel you trust."}, nil
		}),
	}
	add.Flags().StringVar(&id, "id", "", "merchant id")
	add.Flags().StringVar(&email, "email", "", "the person's e-mail address")
	add.Flags().StringVar(&role, "role", dashuser.RoleAdmin, "admin or member")
	add.Flags().StringVar(&baseURL, "base-url", "", "public base URL of the API (default: the stack's)")
	var resetEmail, resetBase string
	reset := &cobra.Command{
		Use:   "reset --email E [--base-url URL]",
		Short: "Give a person a one-time link to set a new password",
		Long: "reset prints a one-time link that sets a new password of an existing person (their one password for every merchant they work for); " +
			"it works once and expires after " + dashboard.InviteTTL.String() + ", a newer one voids it, and using it ends every session of the person. " +
			"Merchant admins cannot reset passwords: a person's password may open other merchants too.",
		Example: "  payctl --local merchant user reset --email ana@acme.example",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			if resetEmail == "" {
				return nil, usageError("--email is required")
			}
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			base, err := linkBase(e, resetBase)
			if err != nil {
				return nil, err
			}
			link, until, err := dashboard.ResetPassword(ctx, e.store, resetEmail, "payctl", base, time.Now())
			if err != nil {
				return nil, err
			}
			return map[string]any{"email": resetEmail, "setPasswordUrl": link, "expiresIn": dashboard.InviteTTL.String(),
				"expiresAt": until.UTC().Format(time.RFC3339),
				"notice":    "The link is shown only now and works once, until expiresAt. Send it to the person over a channel you trust."}, nil
		}),
	}
	reset.Flags().StringVar(&resetEmail, "email", "", "the person's e-mail address")
	reset.Flags().StringVar(&resetBase, "base-url", "", "public base URL of the API (default: the stack's)")
	c.AddCommand(add, reset)
	c.AddCommand(&cobra.Command{
		Use:   "migrate",
		Short: "Turn dashboard users stored per merchant into one identity per address",
		Long: "migrate turns every dashboard user stored per merchant (or, earlier, per address) into a membership of one identity per e-mail address. " +
			"The only user of an address becomes its identity (password, second factor and sessions kept). Where an address has several users, " +
			"nothing is merged on trust: each becomes a membership awaiting its own password (the person's first sign-in proves one; each other is " +
			"linked with its own password or a fresh invitation). A user who never set a password becomes an invitation. " +
			"Safe to run twice and while the service runs: a user changed meanwhile is left for the next run.",
		Example: "  payctl merchant user migrate",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			return e.store.MigrateDashboardUsers(ctx, time.Now().UTC())
		}),
	})
	return c
}

// linkBase is the base URL of a link: the flag, else the stack's API.
func linkBase(e *env, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if e.apiBase == "" {
		return "", errors.New("the stack's API URL is unknown: pass --base-url")
	}
	return e.apiBase, nil
}

// auditPayctl records an operator's change in the merchant's audit log,
// which the merchant's admins read in the dashboard.
func auditPayctl(ctx context.Context, e *env, merchantID, action, detail string) error {
	return dashboard.Record(ctx, e.store, merchantID, "payctl", action, detail, time.Now())
}
