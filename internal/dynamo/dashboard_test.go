package dynamo_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
)

// Users stored before identities — per merchant (pk "dashmuser#<m>"), or
// earlier per address (pk "dashuser#<email>", sk "user", plus an index
// item) — become memberships of one identity per address: the only user of
// an address becomes its identity with every credential kept; an address
// with two users (two passwords) gets two unproven memberships and no
// password; a user without a password becomes an invitation; an address
// that already has an identity is not merged on trust. A second run
// changes nothing.
func TestMigrateDashboardUsersMakesOneIdentityPerAddress(t *testing.T) {
	s, _, client, tables := newStore(t)
	ctx := context.Background()
	sfx := strconv.FormatInt(time.Now().UnixNano(), 36)
	m1, m2 := "mer_mig1"+sfx, "mer_mig2"+sfx
	single, twice := "single."+sfx+"@shop.example", "twice."+sfx+"@shop.example"
	legacy, invited, known := "legacy."+sfx+"@shop.example", "invited."+sfx+"@shop.example", "known."+sfx+"@shop.example"
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	num := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tables.Operations, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	user := func(pk, sk, email, merchant, role, hash string, extra map[string]types.AttributeValue) {
		item := map[string]types.AttributeValue{"pk": str(pk), "sk": str(sk), "email": str(email), "merchantId": str(merchant),
			"role": str(role), "createdAt": str(created.Format(time.RFC3339Nano)), "updatedAt": str(created.Format(time.RFC3339Nano)),
			"version": num("4")}
		if hash != "" {
			item["passwordHash"] = str(hash)
		}
		for k, v := range extra {
			item[k] = v
		}
		put(item)
	}
	// The only user of its address, with a second factor and a step.
	user("dashmuser#"+m1, single, single, m1, "admin", "$argon2id$single", map[string]types.AttributeValue{
		"sealedTotp": str("sealed-single"), "totpStep": num("7"), "credVersion": num("3")})
	// One address, two merchants, two passwords.
	user("dashmuser#"+m1, twice, twice, m1, "admin", "$argon2id$at-m1", map[string]types.AttributeValue{"sealedTotp": str("sealed-m1")})
	user("dashmuser#"+m2, twice, twice, m2, "member", "$argon2id$at-m2", nil)
	// The address-keyed form, with its index item.
	user("dashuser#"+legacy, "user", legacy, m2, "member", "$argon2id$legacy", nil)
	put(map[string]types.AttributeValue{"pk": str("dashusers#" + m2), "sk": str(legacy), "role": str("member")})
	// A user who never set a password.
	user("dashmuser#"+m2, invited, invited, m2, "member", "", map[string]types.AttributeValue{"inviteHash": str("hash-of-link")})
	// An address that already has an identity (with another password).
	if err := s.CreateIdentity(ctx, &dashuser.Identity{Email: known, PasswordHash: "$argon2id$identity", CreatedAt: created, UpdatedAt: created}); err != nil {
		t.Fatal(err)
	}
	user("dashmuser#"+m1, known, known, m1, "member", "$argon2id$known-at-m1", nil)

	rep, err := s.MigrateDashboardUsers(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Identities < 2 || rep.Unproven < 3 || rep.Invited < 1 || rep.Left != 0 {
		t.Errorf("report %+v: want at least 2 identities, 3 unproven, 1 invited, none left", rep)
	}
	person := func(email string) (*dashuser.Identity, map[string]*dashuser.Membership) {
		t.Helper()
		id, ms, err := s.Identity(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]*dashuser.Membership{}
		for _, m := range ms {
			by[m.MerchantID] = m
		}
		return id, by
	}
	id, ms := person(single)
	if id == nil || id.PasswordHash != "$argon2id$single" || id.SealedTOTP != "sealed-single" || id.TOTPStep != 7 || id.CredVersion != 3 ||
		!id.CreatedAt.Equal(created) {
		t.Errorf("the only user's identity: %+v", id)
	}
	if m := ms[m1]; len(ms) != 1 || !m.Usable() || m.Role != "admin" {
		t.Errorf("the only user's membership: %+v", ms)
	}
	id, ms = person(twice)
	if id != nil {
		t.Errorf("two passwords were merged into an identity: %+v", id)
	}
	if a, b := ms[m1], ms[m2]; a == nil || b == nil || a.State != dashuser.StateUnproven || b.State != dashuser.StateUnproven ||
		a.LegacyHash != "$argon2id$at-m1" || a.LegacyTOTP != "sealed-m1" || b.LegacyHash != "$argon2id$at-m2" || a.Role != "admin" || b.Role != "member" {
		t.Errorf("two passwords: %+v %+v", a, b)
	}
	if id, ms = person(legacy); id == nil || id.PasswordHash != "$argon2id$legacy" || !ms[m2].Usable() {
		t.Errorf("address-keyed user: %+v %+v", id, ms)
	}
	if id, ms = person(invited); id != nil || ms[m2] == nil || ms[m2].State != dashuser.StateInvited || ms[m2].InviteHash != "hash-of-link" {
		t.Errorf("user without a password: %+v %+v", id, ms[m2])
	}
	if id, ms = person(known); id == nil || id.PasswordHash != "$argon2id$identity" || ms[m1] == nil || ms[m1].State != dashuser.StateUnproven {
		t.Errorf("an address with an identity: %+v %+v", id, ms[m1])
	}
	// The rosters list them, without the legacy secrets.
	roster, err := s.Members(ctx, m1)
	if err != nil {
		t.Fatal(err)
	}
	if len(roster) != 3 {
		t.Errorf("merchant 1's roster: %d members, want 3", len(roster))
	}
	for _, m := range roster {
		if m.LegacyHash != "" || m.LegacyTOTP != "" {
			t.Errorf("the roster holds a password hash: %+v", m)
		}
	}
	// The old items are gone.
	for _, key := range [][2]string{{"dashmuser#" + m1, single}, {"dashmuser#" + m2, twice}, {"dashuser#" + legacy, "user"},
		{"dashusers#" + m2, legacy}, {"dashmuser#" + m2, invited}, {"dashmuser#" + m1, known}} {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Operations, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": str(key[0]), "sk": str(key[1])}})
		if err != nil || out.Item != nil {
			t.Errorf("old item %v left: %v", key, err)
		}
	}
	// A second run changes nothing; a stale old copy of a migrated user is
	// dropped without touching the membership.
	before, _ := person(single)
	user("dashmuser#"+m1, single, single, m1, "member", "$argon2id$stale", nil)
	rep, err = s.MigrateDashboardUsers(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Identities != 0 || rep.Unproven != 0 || rep.Invited != 0 || rep.Skipped != 1 {
		t.Errorf("second run: %+v, want only the stale copy skipped", rep)
	}
	if id, ms = person(single); id.Version != before.Version || id.PasswordHash != "$argon2id$single" || ms[m1].Role != "admin" {
		t.Errorf("the second run changed the identity: %+v %+v", id, ms[m1])
	}
}

// A membership and its roster copy are written together, each under its
// guard: a create meets an existing membership, a change or a delete meets
// a changed version, and nothing is written.
func TestMembershipsAreWrittenWithTheirRosterUnderGuards(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	sfx := strconv.FormatInt(time.Now().UnixNano(), 36)
	email, merchant := "member."+sfx+"@shop.example", "mer_mem"+sfx
	now := time.Now().UTC()
	m := &dashuser.Membership{Email: email, MerchantID: merchant, Role: "member", State: dashuser.StateInvited, CreatedAt: now, UpdatedAt: now}
	if err := s.SaveMemberships(ctx, nil, m); err != nil || m.Version != 1 {
		t.Fatalf("create: %v (version %d)", err, m.Version)
	}
	again := &dashuser.Membership{Email: email, MerchantID: merchant, Role: "admin", State: dashuser.StateActive, CreatedAt: now, UpdatedAt: now}
	if err := s.SaveMemberships(ctx, nil, again); !errkind.Is(err, errkind.Conflict) {
		t.Errorf("a second create: %v, want a conflict", err)
	}
	stale := *m
	m.State = dashuser.StateActive
	if err := s.SaveMemberships(ctx, nil, m); err != nil {
		t.Fatal(err)
	}
	stale.Role = "admin"
	if err := s.SaveMemberships(ctx, nil, &stale); !errkind.Is(err, errkind.Conflict) {
		t.Errorf("a change at an old version: %v", err)
	}
	if err := s.DeleteMembership(ctx, &stale); !errkind.Is(err, errkind.Conflict) {
		t.Errorf("a delete at an old version: %v", err)
	}
	roster, err := s.Members(ctx, merchant)
	if err != nil || len(roster) != 1 || roster[0].Role != "member" || !roster[0].Usable() {
		t.Fatalf("roster: %+v %v", roster, err)
	}
	if err := s.DeleteMembership(ctx, m); err != nil {
		t.Fatal(err)
	}
	if roster, _ := s.Members(ctx, merchant); len(roster) != 0 {
		t.Errorf("the roster kept a deleted membership: %+v", roster)
	}
	if _, err := s.Membership(ctx, email, merchant); !errkind.Is(err, errkind.NotFound) {
		t.Errorf("deleted membership: %v", err)
	}
}
