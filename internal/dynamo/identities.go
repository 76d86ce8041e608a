package dynamo

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/dashuser"
)

// The dashboard's people. A person is one identity per address; each
// merchant they belong to is a membership item in the identity's partition
// (so one consistent Query reads a person whole: what every signed-in
// request checks), mirrored in the merchant's roster (what its Users page
// lists and its last-admin check counts). The two are written together,
// in one TransactWriteItems, each under its guard: a membership is created
// with attribute_not_exists(pk) and changed or deleted only at the version
// read; the roster copy follows it.
//
// Every write is safe to send twice: the transactions carry the SDK's
// ClientRequestToken (DynamoDB answers a replay with success, applying
// nothing again); single-item identity writes are version-guarded puts,
// which the store's client recognises as its own when their answer was
// lost (echo.go).

type identityRecord struct {
	PK           string    `dynamodbav:"pk"`
	SK           string    `dynamodbav:"sk"`
	Email        string    `dynamodbav:"email"`
	PasswordHash string    `dynamodbav:"passwordHash,omitempty"`
	SealedTOTP   string    `dynamodbav:"sealedTotp,omitempty"`
	TOTPStep     uint64    `dynamodbav:"totpStep,omitempty"`
	CredVersion  int64     `dynamodbav:"credVersion,omitempty"`
	ResetHash    string    `dynamodbav:"resetHash,omitempty"`
	CreatedAt    time.Time `dynamodbav:"createdAt"`
	UpdatedAt    time.Time `dynamodbav:"updatedAt"`
	Version      int64     `dynamodbav:"version"`
}

type membershipRecord struct {
	PK              string    `dynamodbav:"pk"`
	SK              string    `dynamodbav:"sk"`
	Email           string    `dynamodbav:"email"`
	MerchantID      string    `dynamodbav:"merchantId"`
	MerchantName    string    `dynamodbav:"merchantName,omitempty"`
	Role            string    `dynamodbav:"role"`
	State           string    `dynamodbav:"state"`
	InviteHash      string    `dynamodbav:"inviteHash,omitempty"`
	InviteExpiresMs int64     `dynamodbav:"inviteExpiresMs,omitempty"`
	InvitedBy       string    `dynamodbav:"invitedBy,omitempty"`
	LegacyHash      string    `dynamodbav:"legacyHash,omitempty"`
	LegacyTOTP      string    `dynamodbav:"legacyTotp,omitempty"`
	CreatedAt       time.Time `dynamodbav:"createdAt"`
	UpdatedAt       time.Time `dynamodbav:"updatedAt"`
	Version         int64     `dynamodbav:"version"`
}

const (
	identitySK   = "identity"
	membershipSK = "m#"
)

func identityKey(email string) map[string]types.AttributeValue {
	return dashKey(dashIdentityPrefix+email, identitySK)
}

func membershipKey(email, merchantID string) map[string]types.AttributeValue {
	return dashKey(dashIdentityPrefix+email, membershipSK+merchantID)
}

func rosterKey(merchantID, email string) map[string]types.AttributeValue {
	return dashKey(dashRosterPrefix+merchantID, email)
}

func identityItem(id *dashuser.Identity, version int64) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(identityRecord{PK: dashIdentityPrefix + id.Email, SK: identitySK, Email: id.Email,
		PasswordHash: id.PasswordHash, SealedTOTP: id.SealedTOTP, TOTPStep: id.TOTPStep, CredVersion: id.CredVersion,
		ResetHash: id.ResetHash, CreatedAt: id.CreatedAt.UTC(), UpdatedAt: id.UpdatedAt.UTC(), Version: version})
	if err != nil {
		return nil, fmt.Errorf("marshal dashboard identity: %w", err)
	}
	return item, nil
}

func identityOf(r *identityRecord) *dashuser.Identity {
	return &dashuser.Identity{Email: r.Email, PasswordHash: r.PasswordHash, SealedTOTP: r.SealedTOTP, TOTPStep: r.TOTPStep,
		CredVersion: r.CredVersion, ResetHash: r.ResetHash, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version}
}

// membershipItems renders m at version: the authoritative item in the
// person's partition, and the roster copy without the legacy secrets.
func membershipItems(m *dashuser.Membership, version int64) (own, roster map[string]types.AttributeValue, err error) {
	r := membershipRecord{PK: dashIdentityPrefix + m.Email, SK: membershipSK + m.MerchantID, Email: m.Email, MerchantID: m.MerchantID,
		MerchantName: m.MerchantName, Role: m.Role, State: m.State, InviteHash: m.InviteHash, InvitedBy: m.InvitedBy,
		LegacyHash: m.LegacyHash, LegacyTOTP: m.LegacyTOTP, CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC(), Version: version}
	if !m.InviteExpires.IsZero() {
		r.InviteExpiresMs = m.InviteExpires.UnixMilli()
	}
	if own, err = attributevalue.MarshalMap(r); err != nil {
		return nil, nil, fmt.Errorf("marshal dashboard membership: %w", err)
	}
	r.PK, r.SK, r.InviteHash, r.LegacyHash, r.LegacyTOTP = dashRosterPrefix+m.MerchantID, m.Email, "", "", ""
	if roster, err = attributevalue.MarshalMap(r); err != nil {
		return nil, nil, fmt.Errorf("marshal dashboard roster entry: %w", err)
	}
	return own, roster, nil
}

func membershipOf(r *membershipRecord) *dashuser.Membership {
	m := &dashuser.Membership{Email: r.Email, MerchantID: r.MerchantID, MerchantName: r.MerchantName, Role: r.Role, State: r.State,
		InviteHash: r.InviteHash, InvitedBy: r.InvitedBy, LegacyHash: r.LegacyHash, LegacyTOTP: r.LegacyTOTP,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version}
	if r.InviteExpiresMs > 0 {
		m.InviteExpires = time.UnixMilli(r.InviteExpiresMs).UTC()
	}
	return m
}

// Identity reads a person whole, with one consistent Query of their
// partition: the identity (nil while there is none: an address only
// invited, or nobody's) and every membership, by merchant id.
func (s *Store) Identity(ctx context.Context, email string) (*dashuser.Identity, []*dashuser.Membership, error) {
	if email == "" {
		return nil, nil, nil
	}
	var id *dashuser.Identity
	var ms []*dashuser.Membership
	p := dynamodb.NewQueryPaginator(s.queryAPI(), &dynamodb.QueryInput{TableName: &s.t.Operations, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": strAV(dashIdentityPrefix + email)}})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("query dashboard identity: %w", err)
		}
		for _, it := range out.Items {
			sk, _ := it["sk"].(*types.AttributeValueMemberS)
			switch {
			case sk != nil && sk.Value == identitySK:
				var r identityRecord
				if err := attributevalue.UnmarshalMap(it, &r); err != nil {
					return nil, nil, fmt.Errorf("unmarshal dashboard identity: %w", err)
				}
				id = identityOf(&r)
			case sk != nil && strings.HasPrefix(sk.Value, membershipSK):
				var r membershipRecord
				if err := attributevalue.UnmarshalMap(it, &r); err != nil {
					return nil, nil, fmt.Errorf("unmarshal dashboard membership: %w", err)
				}
				ms = append(ms, membershipOf(&r))
			}
		}
	}
	return id, ms, nil
}

// Membership reads one person's membership of a merchant; NotFound.
func (s *Store) Membership(ctx context.Context, email, merchantID string) (*dashuser.Membership, error) {
	if email == "" || merchantID == "" {
		return nil, notFound()
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: membershipKey(email, merchantID),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get dashboard membership: %w", err)
	}
	if out.Item == nil {
		return nil, notFound()
	}
	var r membershipRecord
	if err := attributevalue.UnmarshalMap(out.Item, &r); err != nil {
		return nil, fmt.Errorf("unmarshal dashboard membership: %w", err)
	}
	return membershipOf(&r), nil
}

// Members lists a merchant's memberships (its roster), by address, with a
// consistent Query; the legacy secrets are not in the roster.
func (s *Store) Members(ctx context.Context, merchantID string) ([]*dashuser.Membership, error) {
	var ms []*dashuser.Membership
	p := dynamodb.NewQueryPaginator(s.queryAPI(), &dynamodb.QueryInput{TableName: &s.t.Operations, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": strAV(dashRosterPrefix + merchantID)}})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query dashboard roster: %w", err)
		}
		for _, it := range out.Items {
			var r membershipRecord
			if err := attributevalue.UnmarshalMap(it, &r); err != nil {
				return nil, err
			}
			ms = append(ms, membershipOf(&r))
		}
	}
	return ms, nil
}

// CreateIdentity stores a new identity; Exists when the address has one
// (guard: attribute_not_exists(pk)).
func (s *Store) CreateIdentity(ctx context.Context, id *dashuser.Identity) error {
	item, err := identityItem(id, 1)
	if err != nil {
		return err
	}
	if err := s.putIfAbsent(ctx, s.t.Operations, "pk", item, "dashboard identity"); err != nil {
		return err
	}
	id.Version = 1
	return nil
}

// UpdateIdentity replaces an identity if its version is still the one read
// (guard: attribute_exists(pk) AND version = :read); Conflict otherwise.
func (s *Store) UpdateIdentity(ctx context.Context, id *dashuser.Identity) error {
	prev := id.Version
	item, err := identityItem(id, prev+1)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Operations, Item: item,
		ConditionExpression:       aws.String("attribute_exists(pk) AND version = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": numberAV(prev)}})
	if isConditionFailed(err) {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("update dashboard identity: %w", err)
	}
	id.Version = prev + 1
	return nil
}

// guardedPut is a transaction's put of an item at version+1: a create
// (version 0, guard attribute_not_exists(pk)) or a change of the version
// read.
func (s *Store) guardedPut(item map[string]types.AttributeValue, version int64) types.TransactWriteItem {
	p := &types.Put{TableName: &s.t.Operations, Item: item}
	if version == 0 {
		p.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		p.ConditionExpression = aws.String("attribute_exists(pk) AND version = :v")
		p.ExpressionAttributeValues = map[string]types.AttributeValue{":v": numberAV(version)}
	}
	return types.TransactWriteItem{Put: p}
}

// SaveMemberships writes an identity (nil: untouched) and memberships, with
// their roster copies, in one transaction: all or none. Each identity or
// membership of Version 0 is created (Conflict when it exists), any
// other is replaced only at its version (Conflict when it changed). On
// success every version is stepped.
func (s *Store) SaveMemberships(ctx context.Context, id *dashuser.Identity, ms ...*dashuser.Membership) error {
	var items []types.TransactWriteItem
	if id != nil {
		item, err := identityItem(id, id.Version+1)
		if err != nil {
			return err
		}
		items = append(items, s.guardedPut(item, id.Version))
	}
	for _, m := range ms {
		own, roster, err := membershipItems(m, m.Version+1)
		if err != nil {
			return err
		}
		items = append(items, s.guardedPut(own, m.Version), types.TransactWriteItem{Put: &types.Put{TableName: &s.t.Operations, Item: roster}})
	}
	if len(items) == 0 {
		return nil
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if _, ok := cancelled(err); ok {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("save dashboard memberships: %w", err)
	}
	if id != nil {
		id.Version++
	}
	for _, m := range ms {
		m.Version++
	}
	return nil
}

// DeleteMembership removes a membership and its roster copy in one
// transaction if its version is still the one read; Conflict otherwise
// (changed or removed meanwhile: read again).
func (s *Store) DeleteMembership(ctx context.Context, m *dashuser.Membership) error {
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: &s.t.Operations, Key: membershipKey(m.Email, m.MerchantID),
			ConditionExpression:       aws.String("attribute_exists(pk) AND version = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": numberAV(m.Version)}}},
		{Delete: &types.Delete{TableName: &s.t.Operations, Key: rosterKey(m.MerchantID, m.Email)}},
	}})
	if _, ok := cancelled(err); ok {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("delete dashboard membership: %w", err)
	}
	return nil
}

// legacyUserRecord is a dashboard user stored before identities: per
// merchant, or earlier per address.
type legacyUserRecord struct {
	PK           string    `dynamodbav:"pk"`
	SK           string    `dynamodbav:"sk"`
	Email        string    `dynamodbav:"email"`
	MerchantID   string    `dynamodbav:"merchantId"`
	Role         string    `dynamodbav:"role"`
	PasswordHash string    `dynamodbav:"passwordHash,omitempty"`
	SealedTOTP   string    `dynamodbav:"sealedTotp,omitempty"`
	TOTPStep     uint64    `dynamodbav:"totpStep,omitempty"`
	CredVersion  int64     `dynamodbav:"credVersion,omitempty"`
	InviteHash   string    `dynamodbav:"inviteHash,omitempty"`
	CreatedAt    time.Time `dynamodbav:"createdAt"`
	UpdatedAt    time.Time `dynamodbav:"updatedAt"`
	Version      int64     `dynamodbav:"version"`
}

// MigrationReport says what MigrateDashboardUsers did.
type MigrationReport struct {
	// Identities created from the only user of an address, with its
	// password and second factor (its membership is active at once).
	Identities int `json:"identities"`
	// Unproven memberships: the address had several users, or already an
	// identity; each is linked by its own password or a fresh invitation.
	Unproven int `json:"unproven"`
	// Invited: users who had not set a password yet became invitations.
	Invited int `json:"invited"`
	// Skipped: the membership existed already; the old user was dropped.
	Skipped int `json:"skipped"`
	// Left: changed while the migration ran; the next run takes them.
	Left int `json:"left"`
}

// legacyInviteTTL is how long a per-merchant user's set-password link
// lived (dashboard.InviteTTL): an invitation migrated from one lapses then.
const legacyInviteTTL = 24 * time.Hour

// MigrateDashboardUsers turns the users stored before identities (per
// merchant, or earlier per address) into memberships of one identity per
// address. Nothing is merged on trust: the only user of an address with no
// identity yet becomes that identity (password, second factor, sessions
// kept) with an active membership; every other user becomes an unproven
// membership keeping its password hash, linked when the person proves that
// password (the first sign-in of an identity without a password proves
// one), or accepts a fresh invitation; a user who never set a password
// becomes an invitation. Each user moves in one transaction that deletes
// its old item only at the version scanned, so the migration is safe to
// run twice and while the service runs: a user changed meanwhile is left
// for the next run; a membership that exists already is never replaced.
func (s *Store) MigrateDashboardUsers(ctx context.Context, now time.Time) (MigrationReport, error) {
	var rep MigrationReport
	byEmail := map[string][]legacyUserRecord{}
	err := s.consistentScan(ctx, s.t.Operations, "begins_with(pk, :mu) OR (begins_with(pk, :u) AND sk = :user)",
		map[string]types.AttributeValue{":mu": strAV(legacyMUserPrefix), ":u": strAV(legacyUserPrefix), ":user": strAV("user")},
		func(item map[string]types.AttributeValue) error {
			var r legacyUserRecord
			if err := attributevalue.UnmarshalMap(item, &r); err != nil {
				return fmt.Errorf("unmarshal dashboard user: %w", err)
			}
			if r.Email != "" && r.MerchantID != "" {
				byEmail[r.Email] = append(byEmail[r.Email], r)
			}
			return nil
		})
	if err != nil {
		return rep, err
	}
	emails := make([]string, 0, len(byEmail))
	for e := range byEmail {
		emails = append(emails, e)
	}
	sort.Strings(emails)
	names := map[string]string{}
	nameOf := func(merchantID string) string {
		if n, ok := names[merchantID]; ok {
			return n
		}
		n := ""
		if m, err := s.Merchant(ctx, merchantID); err == nil {
			n = m.Name
		}
		names[merchantID] = n
		return n
	}
	for _, email := range emails {
		users := byEmail[email]
		id, ms, err := s.Identity(ctx, email)
		if err != nil {
			return rep, err
		}
		have := map[string]bool{}
		for _, m := range ms {
			have[m.MerchantID] = true
		}
		if u := users[0]; id == nil && len(users) == 1 && !have[u.MerchantID] && u.PasswordHash != "" {
			nid := &dashuser.Identity{Email: email, PasswordHash: u.PasswordHash, SealedTOTP: u.SealedTOTP, TOTPStep: u.TOTPStep,
				CredVersion: u.CredVersion, CreatedAt: u.CreatedAt, UpdatedAt: now}
			m := &dashuser.Membership{Email: email, MerchantID: u.MerchantID, MerchantName: nameOf(u.MerchantID), Role: u.Role,
				State: dashuser.StateActive, CreatedAt: u.CreatedAt, UpdatedAt: now}
			ok, err := s.moveLegacyUser(ctx, u, nid, m)
			if err != nil {
				return rep, err
			}
			if ok {
				rep.Identities++
			} else {
				rep.Left++
			}
			continue
		}
		for _, u := range users {
			if have[u.MerchantID] {
				ok, err := s.moveLegacyUser(ctx, u, nil, nil)
				if err != nil {
					return rep, err
				}
				if ok {
					rep.Skipped++
				} else {
					rep.Left++
				}
				continue
			}
			m := &dashuser.Membership{Email: email, MerchantID: u.MerchantID, MerchantName: nameOf(u.MerchantID), Role: u.Role,
				CreatedAt: u.CreatedAt, UpdatedAt: now}
			if u.PasswordHash == "" {
				m.State, m.InviteHash, m.InviteExpires = dashuser.StateInvited, u.InviteHash, u.UpdatedAt.Add(legacyInviteTTL)
			} else {
				m.State, m.LegacyHash, m.LegacyTOTP = dashuser.StateUnproven, u.PasswordHash, u.SealedTOTP
			}
			ok, err := s.moveLegacyUser(ctx, u, nil, m)
			if err != nil {
				return rep, err
			}
			switch {
			case !ok:
				rep.Left++
			case m.State == dashuser.StateInvited:
				rep.Invited++
			default:
				rep.Unproven++
			}
		}
	}
	return rep, nil
}

// moveLegacyUser writes id (nil: none) and m (nil: none, the membership
// exists) and deletes u's old item at the version scanned, in one
// transaction; false when a guard failed (u changed, or the identity or
// membership appeared meanwhile: the next run decides again).
func (s *Store) moveLegacyUser(ctx context.Context, u legacyUserRecord, id *dashuser.Identity, m *dashuser.Membership) (bool, error) {
	var items []types.TransactWriteItem
	if id != nil {
		item, err := identityItem(id, 1)
		if err != nil {
			return false, err
		}
		items = append(items, s.guardedPut(item, 0))
	}
	if m != nil {
		own, roster, err := membershipItems(m, 1)
		if err != nil {
			return false, err
		}
		items = append(items, s.guardedPut(own, 0), types.TransactWriteItem{Put: &types.Put{TableName: &s.t.Operations, Item: roster}})
	}
	items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.t.Operations, Key: dashKey(u.PK, u.SK),
		ConditionExpression: aws.String("version = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": numberAV(u.Version)}}})
	if strings.HasPrefix(u.PK, legacyUserPrefix) { // the address-keyed form's index item
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.t.Operations,
			Key: dashKey(legacyUsersPrefix+u.MerchantID, u.Email)}})
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if _, ok := cancelled(err); ok {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("migrate dashboard user: %w", err)
	}
	return true, nil
}
