package dynamo_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
)

// peopleTwice extends sentTwice to the dashboard's other writes: a
// transaction is sent twice with one ClientRequestToken (as the SDK's
// retry sends it), a delete twice.
type peopleTwice struct {
	*sentTwice
}

func (s peopleTwice) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	in2 := *in
	if in2.ClientRequestToken == nil {
		in2.ClientRequestToken = aws.String(uniq("tok-"))
	}
	if _, err := s.Client.TransactWriteItems(ctx, &in2, opts...); err != nil {
		return nil, err
	}
	return s.Client.TransactWriteItems(ctx, &in2, opts...)
}

func (s peopleTwice) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if _, err := s.Client.DeleteItem(ctx, in, opts...); err != nil {
		return nil, err
	}
	return s.Client.DeleteItem(ctx, in, opts...)
}

// TestPeopleWritesAreSafeToSendTwice: every write of the dashboard's people
// (identities, memberships and their roster copies, the member-change
// lease, links, sessions, the migration) and of a key or secret rotation
// with an overlap, applied and then sent again as the SDK sends it when
// the first answer was lost, succeeds and applies once; a different write
// at a passed version still conflicts.
func TestPeopleWritesAreSafeToSendTwice(t *testing.T) {
	_, _, client, tables := newStore(t)
	s := dynamo.New(peopleTwice{&sentTwice{Client: client}}, tables)
	plain := dynamo.New(client, tables)
	ctx := context.Background()
	now := time.Now().UTC()
	email := uniq("twice.") + "@shop.example"
	mer := testenv.NewMerchant(t)

	id := &dashuser.Identity{Email: email, PasswordHash: "h1", CreatedAt: now, UpdatedAt: now}
	if err := s.CreateIdentity(ctx, id); err != nil || id.Version != 1 {
		t.Fatalf("identity created, sent twice: %v (version %d)", err, id.Version)
	}
	id.PasswordHash, id.CredVersion = "h2", 1
	if err := s.UpdateIdentity(ctx, id); err != nil || id.Version != 2 {
		t.Fatalf("identity updated, sent twice: %v (version %d)", err, id.Version)
	}
	stale := *id
	stale.Version = 1
	if err := plain.UpdateIdentity(ctx, &stale); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("an update at a passed version: %v, want a conflict", err)
	}

	m := &dashuser.Membership{Email: email, MerchantID: mer.ID, Role: dashuser.RoleMember, State: dashuser.StateInvited,
		InviteHash: "ih", InviteExpires: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
	if err := s.SaveMemberships(ctx, nil, m); err != nil || m.Version != 1 {
		t.Fatalf("invitation, sent twice: %v (version %d)", err, m.Version)
	}
	m.State, m.InviteHash, m.InviteExpires = dashuser.StateActive, "", time.Time{}
	if err := s.SaveMemberships(ctx, id, m); err != nil || m.Version != 2 || id.Version != 3 {
		t.Fatalf("acceptance with the identity, sent twice: %v (versions %d, %d)", err, m.Version, id.Version)
	}
	staleM := *m
	staleM.Version, staleM.Role = 1, dashuser.RoleAdmin
	if err := plain.SaveMemberships(ctx, nil, &staleM); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("a membership write at a passed version: %v, want a conflict", err)
	}
	got, ms, err := plain.Identity(ctx, email)
	if err != nil || got == nil || got.Version != 3 || len(ms) != 1 || ms[0].Version != 2 || !ms[0].Usable() {
		t.Fatalf("after the writes: %+v %+v %v", got, ms, err)
	}
	if roster, err := plain.Members(ctx, mer.ID); err != nil || len(roster) != 1 || !roster[0].Usable() {
		t.Fatalf("roster: %+v %v", roster, err)
	}

	owner := uniq("owner-")
	if err := s.LockUsers(ctx, mer.ID, owner, now.Add(time.Minute), now); err != nil {
		t.Fatalf("member-change lease, sent twice: %v", err)
	}
	if err := plain.LockUsers(ctx, mer.ID, uniq("other-"), now.Add(time.Minute), now); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("another owner during the lease: %v, want a conflict", err)
	}
	if err := s.UnlockUsers(ctx, mer.ID, owner); err != nil {
		t.Fatalf("lease released, sent twice: %v", err)
	}
	if err := plain.LockUsers(ctx, mer.ID, uniq("other-"), now.Add(time.Minute), now); err != nil {
		t.Fatalf("the lease after its release: %v", err)
	}

	if err := s.DeleteMembership(ctx, m); err != nil {
		t.Fatalf("removal, sent twice: %v", err)
	}
	if _, err := plain.Membership(ctx, email, mer.ID); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("membership after its removal: %v", err)
	}
	if roster, err := plain.Members(ctx, mer.ID); err != nil || len(roster) != 0 {
		t.Fatalf("roster after the removal: %+v %v", roster, err)
	}

	inv := &dashuser.Invite{TokenHash: uniq("inv-"), Kind: dashuser.LinkInvite, Email: email, MerchantID: mer.ID, Role: dashuser.RoleMember,
		CreatedBy: "payctl", ExpiresAt: now.Add(time.Hour)}
	if err := s.PutInvite(ctx, inv); err != nil {
		t.Fatal(err)
	}
	if took, err := s.TakeInvite(ctx, inv.TokenHash, now); err != nil || took.Email != email {
		t.Fatalf("link used, sent twice: %+v %v", took, err)
	}
	if _, err := plain.TakeInvite(ctx, inv.TokenHash, now); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("the link used again: %v, want not found", err)
	}

	ss := &dashuser.Session{IDHash: uniq("sess-"), Email: email, CSRF: "c", CreatedAt: now, LastSeen: now, ExpiresAt: now.Add(time.Hour)}
	if err := s.PutSession(ctx, ss); err != nil {
		t.Fatalf("session, sent twice: %v", err)
	}
	if err := s.SetSessionMerchant(ctx, ss.IDHash, mer.ID); err != nil {
		t.Fatalf("switch, sent twice: %v", err)
	}
	if got, err := plain.Session(ctx, ss.IDHash, now); err != nil || got.MerchantID != mer.ID {
		t.Fatalf("session after the switch: %+v %v", got, err)
	}

	mm, err := plain.Merchant(ctx, mer.ID)
	if err != nil {
		t.Fatal(err)
	}
	oldHash := mm.APIKeyHash
	if err := s.PutPreviousAPIKey(ctx, mm.ID, oldHash, now.Add(time.Hour)); err != nil {
		t.Fatalf("previous key pointer, sent twice: %v", err)
	}
	key := merchant.NewAPIKey(mm.Sandbox)
	mm.RotateAPIKey(key, "sealed", time.Hour, now)
	mm.RotateWebhookSecret("sealed-secret", time.Hour, now)
	if err := s.UpdateMerchant(ctx, mm); err != nil {
		t.Fatalf("rotation with an overlap, sent twice: %v", err)
	}
	byOld, err := plain.MerchantByAPIKeyHash(ctx, oldHash)
	if err != nil || byOld.ID != mm.ID || !byOld.PreviousAPIKeyLive(now) {
		t.Fatalf("the old key during its overlap: %+v %v", byOld, err)
	}
	mm.EndPreviousAPIKey()
	mm.EndPreviousWebhookSecret()
	if err := s.UpdateMerchant(ctx, mm); err != nil {
		t.Fatalf("overlaps ended early, sent twice: %v", err)
	}
	if got, err := plain.Merchant(ctx, mm.ID); err != nil || got.PreviousAPIKeyLive(now) {
		t.Fatalf("after the end: %+v %v", got, err)
	}

	// The migration: each user moved in a transaction sent twice (another
	// test's run at once may move this user: the identity is judged).
	hash, err := sftpauth.HashPassword("pw")
	if err != nil {
		t.Fatal(err)
	}
	legacy := uniq("legacy.") + "@shop.example"
	at := now.Format(time.RFC3339Nano)
	sv := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tables.Operations,
		Item: map[string]types.AttributeValue{"pk": sv("dashmuser#" + mer.ID), "sk": sv(legacy), "email": sv(legacy), "merchantId": sv(mer.ID),
			"role": sv(dashuser.RoleAdmin), "passwordHash": sv(hash), "createdAt": sv(at), "updatedAt": sv(at), "version": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.MigrateDashboardUsers(ctx, now)
	if err != nil {
		t.Fatalf("migration, each move sent twice: %+v %v", rep, err)
	}
	if got, ms, err := plain.Identity(ctx, legacy); err != nil || got == nil || got.PasswordHash != hash || len(ms) != 1 || !ms[0].Usable() {
		t.Fatalf("the migrated user: %+v %+v %v", got, ms, err)
	}
}

// beforeMove runs the service's write once, just before the migration's
// transaction that moves marker's user (between its scan and its move).
type beforeMove struct {
	*dynamodb.Client
	marker string
	once   sync.Once
	write  func()
}

func (b *beforeMove) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		if d := it.Delete; d != nil {
			if sk, ok := d.Key["sk"].(*types.AttributeValueMemberS); ok && sk.Value == b.marker {
				b.once.Do(b.write)
			}
		}
	}
	return b.Client.TransactWriteItems(ctx, in, opts...)
}

// putLegacy stores a per-merchant user as the service stored them before
// identities.
func putLegacy(t *testing.T, client *dynamodb.Client, table, merchantID, email, hash string, version int) {
	t.Helper()
	at := time.Now().UTC().Format(time.RFC3339Nano)
	sv := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table,
		Item: map[string]types.AttributeValue{"pk": sv("dashmuser#" + merchantID), "sk": sv(email), "email": sv(email), "merchantId": sv(merchantID),
			"role": sv(dashuser.RoleAdmin), "passwordHash": sv(hash), "createdAt": sv(at), "updatedAt": sv(at),
			"version": &types.AttributeValueMemberN{Value: strconv.Itoa(version)}}}); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationWhileTheServiceRuns: the migration moves each user under
// guards, so a write between its scan and its move is never overwritten.
// An invitation of the address to the same merchant made meanwhile stays
// (the user is left, then dropped as skipped by the next run); a user
// changed meanwhile (an instance of the previous version still running) is
// left and moved, with its new password, by the next run.
func TestMigrationWhileTheServiceRuns(t *testing.T) {
	_, _, client, tables := newStore(t)
	plain := dynamo.New(client, tables)
	ctx := context.Background()
	mer := testenv.NewMerchant(t)

	invited := uniq("invited.") + "@shop.example"
	putLegacy(t, client, tables.Operations, mer.ID, invited, "old-hash", 1)
	db := &beforeMove{Client: client, marker: invited, write: func() {
		now := time.Now().UTC()
		if err := plain.SaveMemberships(ctx, nil, &dashuser.Membership{Email: invited, MerchantID: mer.ID, Role: dashuser.RoleMember,
			State: dashuser.StateInvited, InviteHash: "fresh", InviteExpires: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Errorf("the service's invitation: %v", err)
		}
	}}
	rep, err := dynamo.New(db, tables).MigrateDashboardUsers(ctx, time.Now().UTC())
	if err != nil || rep.Left < 1 {
		t.Fatalf("migration meeting an invitation: %+v %v, want the user left", rep, err)
	}
	if rep, err = plain.MigrateDashboardUsers(ctx, time.Now().UTC()); err != nil || rep.Skipped < 1 {
		t.Fatalf("the next run: %+v %v, want the user skipped", rep, err)
	}
	id, ms, err := plain.Identity(ctx, invited)
	if err != nil || id != nil || len(ms) != 1 || ms[0].State != dashuser.StateInvited || ms[0].InviteHash != "fresh" || ms[0].LegacyHash != "" {
		t.Fatalf("the invitation made meanwhile was replaced: %+v %+v %v", id, ms, err)
	}

	changed := uniq("changed.") + "@shop.example"
	putLegacy(t, client, tables.Operations, mer.ID, changed, "old-hash", 1)
	db = &beforeMove{Client: client, marker: changed, write: func() {
		putLegacy(t, client, tables.Operations, mer.ID, changed, "new-hash", 2)
	}}
	if rep, err = dynamo.New(db, tables).MigrateDashboardUsers(ctx, time.Now().UTC()); err != nil || rep.Left < 1 {
		t.Fatalf("migration meeting a changed user: %+v %v, want it left", rep, err)
	}
	if id, _, err := plain.Identity(ctx, changed); err != nil || id != nil {
		t.Fatalf("a user changed meanwhile was moved as scanned: %+v %v", id, err)
	}
	if rep, err = plain.MigrateDashboardUsers(ctx, time.Now().UTC()); err != nil || rep.Identities < 1 {
		t.Fatalf("the next run: %+v %v, want the user moved", rep, err)
	}
	if id, ms, err := plain.Identity(ctx, changed); err != nil || id == nil || id.PasswordHash != "new-hash" || len(ms) != 1 || !ms[0].Usable() {
		t.Fatalf("the changed user after the next run: %+v %+v %v", id, ms, err)
	}
}
