package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/webhook"
)

// SeedMerchant is the merchant every local stack starts with: a sandbox
// merchant, or a production one on a production stack.
type SeedMerchant struct {
	ID           string `json:"id"`
	APIKey       string `json:"apiKey"`
	SFTPUser     string `json:"sftpUser"`
	SFTPPassword string `json:"sftpPassword"`
	// WebhookSecret verifies the merchant's notifications (webhook-signature
	// and the JSON variant's signature); kept across restarts like the key.
	WebhookSecret string `json:"webhookSecret"`
}

// Sandbox reports whether the seeded merchant is a sandbox one (its key).
func (s SeedMerchant) Sandbox() bool { return strings.HasPrefix(s.APIKey, "prk_test_") }

// seedMerchant recreates the merchant saved in path (the emulators keep no
// state across restarts, but a developer's key should not change every run),
// or creates and saves a new one.
func seedMerchant(ctx context.Context, store *dynamo.Store, sealer *seal.Sealer, path, apiBase string, sandbox bool) (SeedMerchant, error) {
	var seed SeedMerchant
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &seed); err != nil {
			return seed, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if seed.ID == "" || seed.APIKey == "" || seed.Sandbox() != sandbox {
		seed = SeedMerchant{ID: merchant.NewID(), APIKey: merchant.NewAPIKey(sandbox)}
	}
	if seed.WebhookSecret == "" {
		var err error
		if seed.WebhookSecret, err = webhook.NewWebhookSecret(); err != nil {
			return seed, err
		}
	}
	secret := seed.WebhookSecret
	// A production merchant cannot have the sandbox selector.
	methods := merchant.AllSelectors()
	if !sandbox {
		methods = slices.DeleteFunc(methods, func(n int) bool { return n == merchant.SandboxSelector })
	}
	// The demo page is served by the stack itself; a merchant site on
	// localhost:8080 is the usual development setup. A live merchant's
	// origins are https only (the production stage's demo is framed as
	// 'self').
	origins := []string{apiBase, "http://localhost:8080", "http://127.0.0.1:8080"}
	if !sandbox {
		origins = nil
	}
	now := time.Now().UTC()
	m := &merchant.Merchant{
		ID: seed.ID, Name: "Sandbox Shop", Sandbox: sandbox,
		AllowedOrigins: origins,
		Methods:        methods,
		APIKeyHash:     merchant.HashAPIKey(seed.APIKey), APIKeyPrefix: merchant.KeyPrefix(seed.APIKey),
		SealedAPIKey: sealer.Seal(seed.APIKey, seed.ID), SealedSecret: sealer.Seal(secret, seed.ID),
		CreatedAt: now, UpdatedAt: now,
	}
	err := store.CreateMerchant(ctx, m)
	if errkind.Is(err, errkind.Exists) {
		// A persistent endpoint kept the merchant: stack.json shows the
		// secret it really signs with.
		if old, gerr := store.Merchant(ctx, seed.ID); gerr == nil && old.SealedSecret != "" {
			if s, oerr := sealer.Open(old.SealedSecret, seed.ID); oerr == nil {
				seed.WebhookSecret = s
			}
		}
	} else if err != nil {
		return seed, fmt.Errorf("seed merchant: %w", err)
	}
	if err := seedSFTPUser(ctx, store, &seed); err != nil {
		return seed, err
	}
	b, _ := json.MarshalIndent(seed, "", "  ")
	return seed, os.WriteFile(path, b, 0o600)
}
