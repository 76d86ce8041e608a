package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/sftpauth"
)

// SeedDashboardUser is the dashboard admin every local stack starts with.
type SeedDashboardUser struct {
	URL        string `json:"url"`
	MerchantID string `json:"merchantId"` // the merchant the admin works for
	Email      string `json:"email"`
	Password   string `json:"password"`
}

// seedDashboardUser creates the sandbox merchant's dashboard admin (an
// identity with an active admin membership) with the password saved in
// path (stable across restarts), or a new one.
func seedDashboardUser(ctx context.Context, store *dynamo.Store, path, apiBase, merchantID string) (SeedDashboardUser, error) {
	var seed SeedDashboardUser
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &seed); err != nil {
			return seed, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if seed.Email == "" || len(seed.Password) < dashboard.MinPasswordLen {
		seed = SeedDashboardUser{Email: "admin@sandbox.example", Password: NewSFTPPassword()}
	}
	seed.URL, seed.MerchantID = apiBase+"/dashboard", merchantID
	// A state directory from before identities holds users per merchant:
	// they become identities and memberships first (safe to run again).
	if _, err := store.MigrateDashboardUsers(ctx, time.Now().UTC()); err != nil {
		return seed, err
	}
	hash, err := sftpauth.HashPassword(seed.Password)
	if err != nil {
		return seed, err
	}
	now := time.Now().UTC()
	id := &dashuser.Identity{Email: seed.Email, PasswordHash: hash, CreatedAt: now, UpdatedAt: now}
	if err := store.CreateIdentity(ctx, id); err != nil && !errkind.Is(err, errkind.Exists) {
		return seed, fmt.Errorf("seed dashboard identity: %w", err)
	}
	name := ""
	if m, err := store.Merchant(ctx, merchantID); err == nil {
		name = m.Name
	}
	m := &dashuser.Membership{Email: seed.Email, MerchantID: merchantID, MerchantName: name, Role: dashuser.RoleAdmin,
		State: dashuser.StateActive, CreatedAt: now, UpdatedAt: now}
	if err := store.SaveMemberships(ctx, nil, m); err != nil && !errkind.Is(err, errkind.Conflict) {
		return seed, fmt.Errorf("seed dashboard membership: %w", err)
	}
	b, _ := json.MarshalIndent(seed, "", "  ")
	return seed, os.WriteFile(path, b, 0o600)
}

// localSFTPAddress is the SFTP address the dashboard shows, when the port is
// known before the server starts (a fixed port; tests pick a free one later).
func localSFTPAddress(opts Options) string {
	port := opts.SFTPPort
	if port == 0 && opts.APIPort != 0 {
		port = DefaultSFTPPort
	}
	if port == 0 {
		return ""
	}
	return net.JoinHostPort(opts.Host, strconv.Itoa(port))
}
