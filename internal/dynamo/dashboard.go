package dynamo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/payment"
)

// The merchant dashboard's records, all in the operations table:
//
//	pk "dashmuser#<merchantId>"  sk "<email>"    a user: an identity per merchant and address
//	pk "dashsess#<sha256(id)>"   sk "session"    a session, expiresAt = TTL
//	pk "dashinvite#<sha256(t)>"  sk "invite"     a set-password link, expiresAt = TTL
//	pk "dashaudit#<merchantId>"  sk "<time>#<r>" the merchant's audit log
//	pk "dashlock#<merchantId>"   sk "users"      lease serialising role changes and removals
//
// Until 2026-11 a user was keyed by address alone (pk "dashuser#<email>",
// sk "user", one merchant per address, with an index item pk
// "dashusers#<merchantId>" sk "<email>"); MigrateDashboardUsers moves such
// users to the per-merchant key.
//
// Payment requests are listed per merchant through the payment requests
// table's byMerchantCreated index (merchantId, createdAt).
const (
	dashUserPrefix    = "dashmuser#"
	legacyUserPrefix  = "dashuser#"
	legacyUsersPrefix = "dashusers#"
	dashSessionPrefix = "dashsess#"
	dashInvitePrefix  = "dashinvite#"
	dashAuditPrefix   = "dashaudit#"
	dashLockPrefix    = "dashlock#"
	// MerchantCreatedIndex lists a merchant's payment requests by creation time.
	MerchantCreatedIndex = "byMerchantCreated"
	auditRetention       = 400 * 24 * time.Hour
)

type dashUserRecord struct {
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

func dashKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": strAV(pk), "sk": strAV(sk)}
}

func userRecord(u *dashuser.User, version int64) dashUserRecord {
	return dashUserRecord{PK: dashUserPrefix + u.MerchantID, SK: u.Email, Email: u.Email, MerchantID: u.MerchantID, Role: u.Role,
		PasswordHash: u.PasswordHash, SealedTOTP: u.SealedTOTP, TOTPStep: u.TOTPStep,
		CredVersion: u.CredVersion, InviteHash: u.InviteHash, CreatedAt: u.CreatedAt.UTC(), UpdatedAt: u.UpdatedAt.UTC(), Version: version}
}

func userOf(r *dashUserRecord) *dashuser.User {
	return &dashuser.User{Email: r.Email, MerchantID: r.MerchantID, Role: r.Role, PasswordHash: r.PasswordHash,
		SealedTOTP: r.SealedTOTP, TOTPStep: r.TOTPStep,
		CredVersion: r.CredVersion, InviteHash: r.InviteHash, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version}
}

// CreateDashboardUser stores a new user of u.MerchantID; Exists when the
// merchant has a user of the address (guard: attribute_not_exists(pk)).
// Other merchants' users are never read: an address may be a user of
// several merchants, each a separate identity.
func (s *Store) CreateDashboardUser(ctx context.Context, u *dashuser.User) error {
	u.Version = 1
	item, err := attributevalue.MarshalMap(userRecord(u, 1))
	if err != nil {
		return fmt.Errorf("marshal dashboard user: %w", err)
	}
	return s.putIfAbsent(ctx, s.t.Operations, "pk", item, "dashboard user")
}

// DashboardUser loads merchantID's user of an e-mail address.
func (s *Store) DashboardUser(ctx context.Context, merchantID, email string) (*dashuser.User, error) {
	if merchantID == "" || email == "" {
		return nil, notFound()
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: dashKey(dashUserPrefix+merchantID, email),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get dashboard user: %w", err)
	}
	if out.Item == nil {
		return nil, notFound()
	}
	var r dashUserRecord
	if err := attributevalue.UnmarshalMap(out.Item, &r); err != nil {
		return nil, fmt.Errorf("unmarshal dashboard user: %w", err)
	}
	return userOf(&r), nil
}

// UpdateDashboardUser replaces a user if its version is still the one read
// (guard: attribute_exists(pk) AND version = :read); Conflict otherwise
// (two sign-ins racing on the failure counter, a password set racing a new
// link). Every change of a user goes through it.
func (s *Store) UpdateDashboardUser(ctx context.Context, u *dashuser.User) error {
	prev := u.Version
	item, err := attributevalue.MarshalMap(userRecord(u, prev+1))
	if err != nil {
		return fmt.Errorf("marshal dashboard user: %w", err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Operations, Item: item,
		ConditionExpression:       aws.String("attribute_exists(pk) AND version = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": numberAV(prev)}})
	if isConditionFailed(err) {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("update dashboard user: %w", err)
	}
	u.Version = prev + 1
	return nil
}

// DashboardUsers lists a merchant's users, by address.
func (s *Store) DashboardUsers(ctx context.Context, merchantID string) ([]*dashuser.User, error) {
	var users []*dashuser.User
	p := dynamodb.NewQueryPaginator(s.queryAPI(), &dynamodb.QueryInput{TableName: &s.t.Operations, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": strAV(dashUserPrefix + merchantID)}})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query dashboard users: %w", err)
		}
		for _, it := range out.Items {
			var r dashUserRecord
			if err := attributevalue.UnmarshalMap(it, &r); err != nil {
				return nil, err
			}
			users = append(users, userOf(&r))
		}
	}
	return users, nil
}

// DeleteDashboardUser removes a user if its version is still the one read
// (guard: attribute_exists(pk) AND version = :read; Conflict otherwise).
func (s *Store) DeleteDashboardUser(ctx context.Context, u *dashuser.User) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.t.Operations, Key: dashKey(dashUserPrefix+u.MerchantID, u.Email),
		ConditionExpression:                 aws.String("attribute_exists(pk) AND version = :v"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":v": numberAV(u.Version)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	if alreadyGone(err) {
		return nil // this call's own delete, retried after its answer was lost (or another admin's)
	}
	if isConditionFailed(err) {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("delete dashboard user: %w", err)
	}
	return nil
}

// MigrateDashboardUsers moves users stored under the address-only key
// (before per-merchant identities) to their merchant's key, keeping every
// field (password, second factor, counters, CreatedAt, so their sessions
// stay valid) and removing the old item and its index item. Each move is
// one transaction: put the new item (guard: attribute_not_exists(pk)) and
// delete the old one (guard: version unchanged since the scan). A user
// already at the new key keeps it and the old item is dropped. It is
// idempotent: run it again after a failure; it returns how many it moved.
func (s *Store) MigrateDashboardUsers(ctx context.Context) (int, error) {
	var legacy []dashUserRecord
	err := s.consistentScan(ctx, s.t.Operations, "begins_with(pk, :p) AND sk = :u",
		map[string]types.AttributeValue{":p": strAV(legacyUserPrefix), ":u": strAV("user")}, func(item map[string]types.AttributeValue) error {
			var r dashUserRecord
			if err := attributevalue.UnmarshalMap(item, &r); err != nil {
				return fmt.Errorf("unmarshal legacy dashboard user: %w", err)
			}
			legacy = append(legacy, r)
			return nil
		})
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, r := range legacy {
		u := userOf(&r)
		item, err := attributevalue.MarshalMap(userRecord(u, r.Version))
		if err != nil {
			return moved, fmt.Errorf("marshal dashboard user: %w", err)
		}
		oldKey := dashKey(r.PK, "user")
		guard := map[string]types.AttributeValue{":v": numberAV(r.Version)}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &s.t.Operations, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
			{Delete: &types.Delete{TableName: &s.t.Operations, Key: oldKey, ConditionExpression: aws.String("version = :v"),
				ExpressionAttributeValues: guard}},
		}})
		if failed, ok := cancelled(err); ok {
			if len(failed) == 2 && failed[0] && !failed[1] {
				// Already at the new key (a user created there since): the
				// old item is a stale copy.
				_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.t.Operations, Key: oldKey,
					ConditionExpression: aws.String("version = :v"), ExpressionAttributeValues: guard})
				if isConditionFailed(err) {
					err = nil // changed meanwhile: the next run moves it
				}
			} else {
				err = nil // the old item changed meanwhile (a sign-in): the next run moves it
				continue
			}
		} else if err == nil {
			moved++
		}
		if err != nil {
			return moved, fmt.Errorf("migrate dashboard user: %w", err)
		}
		if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.t.Operations,
			Key: dashKey(legacyUsersPrefix+r.MerchantID, r.Email)}); err != nil {
			return moved, fmt.Errorf("delete legacy dashboard user index: %w", err)
		}
	}
	return moved, nil
}

// LockUsers takes the merchant's user-change lease for owner until until
// (a lease, so a crashed holder blocks others only until it runs out);
// Conflict while another owner holds it.
func (s *Store) LockUsers(ctx context.Context, merchantID, owner string, until, now time.Time) error {
	item := dashKey(dashLockPrefix+merchantID, "users")
	item["owner"], item["until"], item["expiresAt"] = strAV(owner), numberAV(until.UnixMilli()), numberAV(until.Unix()+3600)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Operations, Item: item,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR #u < :now"),
		ExpressionAttributeNames:  map[string]string{"#u": "until"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": numberAV(now.UnixMilli())}})
	if isConditionFailed(err) {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("lock dashboard users: %w", err)
	}
	return nil
}

// UnlockUsers releases owner's lease (a lease taken over by another owner
// after it ran out is left alone).
func (s *Store) UnlockUsers(ctx context.Context, merchantID, owner string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.t.Operations, Key: dashKey(dashLockPrefix+merchantID, "users"),
		ConditionExpression:       aws.String("#o = :o"),
		ExpressionAttributeNames:  map[string]string{"#o": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": strAV(owner)}})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("unlock dashboard users: %w", err)
	}
	return nil
}

type dashSessionRecord struct {
	PK          string    `dynamodbav:"pk"`
	SK          string    `dynamodbav:"sk"`
	Email       string    `dynamodbav:"email"`
	MerchantID  string    `dynamodbav:"merchantId"`
	Role        string    `dynamodbav:"role"`
	CSRF        string    `dynamodbav:"csrf"`
	TOTPPending bool      `dynamodbav:"totpPending,omitempty"`
	UserSince   time.Time `dynamodbav:"userSince"`
	CredVersion int64     `dynamodbav:"credVersion,omitempty"`
	CreatedAt   time.Time `dynamodbav:"createdAt"`
	LastSeenMs  int64     `dynamodbav:"lastSeenMs"` // unix ms: compared in a condition
	Expires     time.Time `dynamodbav:"expires"`
	ExpiresAt   int64     `dynamodbav:"expiresAt"` // unix s (TTL)
}

// PutSession creates a session; Exists on an id collision (never in practice).
func (s *Store) PutSession(ctx context.Context, ss *dashuser.Session) error {
	item, err := attributevalue.MarshalMap(dashSessionRecord{PK: dashSessionPrefix + ss.IDHash, SK: "session", Email: ss.Email,
		MerchantID: ss.MerchantID, Role: ss.Role, CSRF: ss.CSRF, TOTPPending: ss.TOTPPending, UserSince: ss.UserSince.UTC(), CredVersion: ss.CredVersion, CreatedAt: ss.CreatedAt.UTC(),
		LastSeenMs: ss.LastSeen.UnixMilli(), Expires: ss.ExpiresAt.UTC(), ExpiresAt: ss.ExpiresAt.Unix()})
	if err != nil {
		return fmt.Errorf("marshal session: %w", err)
	}
	return s.putIfAbsent(ctx, s.t.Operations, "pk", item, "session")
}

// Session loads a session by id hash; an expired one is NotFound (TTL
// deletion is lazy, so expiry is checked here).
func (s *Store) Session(ctx context.Context, idHash string, now time.Time) (*dashuser.Session, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: dashKey(dashSessionPrefix+idHash, "session"),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	if out.Item == nil {
		return nil, notFound()
	}
	var r dashSessionRecord
	if err := attributevalue.UnmarshalMap(out.Item, &r); err != nil {
		return nil, fmt.Errorf("unmarshal session: %w", err)
	}
	if !now.Before(r.Expires) {
		return nil, notFound()
	}
	seen := r.CreatedAt // sessions from before idle tracking
	if r.LastSeenMs > 0 {
		seen = time.UnixMilli(r.LastSeenMs).UTC()
	}
	return &dashuser.Session{IDHash: idHash, Email: r.Email, MerchantID: r.MerchantID, Role: r.Role, CSRF: r.CSRF,
		TOTPPending: r.TOTPPending, UserSince: r.UserSince, CredVersion: r.CredVersion, CreatedAt: r.CreatedAt, LastSeen: seen, ExpiresAt: r.Expires}, nil
}

// TouchSession records that a session was used at at. It never recreates a
// deleted (signed-out, revoked) session and never moves lastSeen back; a
// failed condition is not an error.
func (s *Store) TouchSession(ctx context.Context, idHash string, at time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.t.Operations, Key: dashKey(dashSessionPrefix+idHash, "session"),
		UpdateExpression:          aws.String("SET lastSeenMs = :at"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(lastSeenMs) OR lastSeenMs < :at)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":at": numberAV(at.UnixMilli())}})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

// DeleteSession removes a session (sign-out, renewal); absent is fine.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.t.Operations, Key: dashKey(dashSessionPrefix+idHash, "session")})
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// PutInvite stores a set-password link.
func (s *Store) PutInvite(ctx context.Context, inv *dashuser.Invite) error {
	item := dashKey(dashInvitePrefix+inv.TokenHash, "invite")
	item["email"], item["merchantId"], item["createdBy"] = strAV(inv.Email), strAV(inv.MerchantID), strAV(inv.CreatedBy)
	item["expiresAt"] = numberAV(inv.ExpiresAt.Unix())
	return s.putIfAbsent(ctx, s.t.Operations, "pk", item, "invite")
}

// Invite reads a link without using it; expired is NotFound.
func (s *Store) Invite(ctx context.Context, tokenHash string, now time.Time) (*dashuser.Invite, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: dashKey(dashInvitePrefix+tokenHash, "invite"),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get invite: %w", err)
	}
	if _, used := out.Item["usedAt"]; used {
		return nil, notFound()
	}
	return inviteOf(out.Item, tokenHash, now)
}

// TakeInvite uses a link and returns it: of two uses racing, one wins
// (a conditional update marks it used; TTL removes it when it expires);
// expired or used is NotFound. It is an update, not a delete, so that a
// use whose answer was lost recognises its own mark when the SDK sends it
// again (a delete leaves nothing to recognise).
func (s *Store) TakeInvite(ctx context.Context, tokenHash string, now time.Time) (*dashuser.Invite, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.t.Operations, Key: dashKey(dashInvitePrefix+tokenHash, "invite"),
		UpdateExpression:          aws.String("SET usedAt = :at"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND expiresAt > :now AND attribute_not_exists(usedAt)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": numberAV(now.Unix()), ":at": numberAV(now.UnixMilli())},
		ReturnValues:              types.ReturnValueAllNew})
	if isConditionFailed(err) {
		return nil, notFound()
	}
	if err != nil {
		return nil, fmt.Errorf("take invite: %w", err)
	}
	return inviteOf(out.Attributes, tokenHash, now)
}

func inviteOf(item map[string]types.AttributeValue, tokenHash string, now time.Time) (*dashuser.Invite, error) {
	if item == nil {
		return nil, notFound()
	}
	var r struct {
		Email      string `dynamodbav:"email"`
		MerchantID string `dynamodbav:"merchantId"`
		CreatedBy  string `dynamodbav:"createdBy"`
		ExpiresAt  int64  `dynamodbav:"expiresAt"`
	}
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return nil, fmt.Errorf("unmarshal invite: %w", err)
	}
	exp := time.Unix(r.ExpiresAt, 0)
	if !now.Before(exp) {
		return nil, notFound()
	}
	return &dashuser.Invite{TokenHash: tokenHash, Email: r.Email, MerchantID: r.MerchantID, CreatedBy: r.CreatedBy, ExpiresAt: exp}, nil
}

// AppendAudit records a change to a merchant's settings, keys or users.
func (s *Store) AppendAudit(ctx context.Context, e dashuser.AuditEntry) error {
	at := e.At.UTC()
	item := dashKey(dashAuditPrefix+e.MerchantID, at.Format("2006-01-02T15:04:05.000000000Z")+"#"+dashuser.NewToken()[:8])
	item["at"], item["actor"], item["action"], item["detail"] = strAV(at.Format(time.RFC3339Nano)), strAV(e.Actor), strAV(e.Action), strAV(e.Detail)
	item["expiresAt"] = numberAV(at.Add(auditRetention).Unix())
	return s.putIfAbsent(ctx, s.t.Operations, "pk", item, "audit entry")
}

// AuditEntries returns a merchant's newest audit entries first.
func (s *Store) AuditEntries(ctx context.Context, merchantID string, limit int32) ([]dashuser.AuditEntry, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{TableName: &s.t.Operations, KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": strAV(dashAuditPrefix + merchantID)},
		ScanIndexForward:          aws.Bool(false), Limit: aws.Int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("query audit entries: %w", err)
	}
	entries := make([]dashuser.AuditEntry, 0, len(out.Items))
	for _, it := range out.Items {
		var r struct {
			At     time.Time `dynamodbav:"at"`
			Actor  string    `dynamodbav:"actor"`
			Action string    `dynamodbav:"action"`
			Detail string    `dynamodbav:"detail"`
		}
		if err := attributevalue.UnmarshalMap(it, &r); err != nil {
			return nil, err
		}
		entries = append(entries, dashuser.AuditEntry{MerchantID: merchantID, At: r.At, Actor: r.Actor, Action: r.Action, Detail: r.Detail})
	}
	return entries, nil
}

type pageCursor struct {
	CreatedAt string `json:"c"`
	ID        string `json:"i"`
}

// PaymentRequestsOf lists a merchant's payment requests through the
// byMerchantCreated index, newest first. The cursor carries only the last
// item's time and id: the merchant half of the start key is always the
// caller's, so a forged cursor cannot reach another merchant's partition.
func (s *Store) PaymentRequestsOf(ctx context.Context, q payment.Query) ([]*payment.Request, string, error) {
	cond := "merchantId = :m"
	vals := map[string]types.AttributeValue{":m": strAV(q.MerchantID)}
	names := map[string]string{}
	switch {
	case !q.From.IsZero() && !q.To.IsZero():
		cond += " AND createdAt BETWEEN :from AND :to"
		vals[":from"], vals[":to"] = strAV(q.From.UTC().Format(time.RFC3339Nano)), strAV(q.To.UTC().Format(time.RFC3339Nano))
	case !q.From.IsZero():
		cond += " AND createdAt >= :from"
		vals[":from"] = strAV(q.From.UTC().Format(time.RFC3339Nano))
	case !q.To.IsZero():
		cond += " AND createdAt <= :to"
		vals[":to"] = strAV(q.To.UTC().Format(time.RFC3339Nano))
	}
	var filters []string
	if q.Status != 0 {
		filters = append(filters, "#st = :st")
		names["#st"] = "status"
		vals[":st"] = numberAV(int64(q.Status))
	}
	if q.Reference != "" {
		filters = append(filters, "referenceId = :ref")
		vals[":ref"] = strAV(q.Reference)
	}
	in := &dynamodb.QueryInput{TableName: &s.t.PaymentRequests, IndexName: aws.String(MerchantCreatedIndex),
		KeyConditionExpression: aws.String(cond), ExpressionAttributeValues: vals, ScanIndexForward: aws.Bool(false)}
	if len(names) > 0 {
		in.ExpressionAttributeNames = names
	}
	if len(filters) > 0 {
		f := filters[0]
		for _, x := range filters[1:] {
			f += " AND " + x
		}
		in.FilterExpression = aws.String(f)
	}
	if q.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		var c pageCursor
		if err != nil || json.Unmarshal(b, &c) != nil || c.CreatedAt == "" {
			return nil, "", fmt.Errorf("cursor: %w", notFound())
		}
		if _, err := strconv.ParseInt(c.ID, 10, 64); err != nil {
			return nil, "", fmt.Errorf("cursor: %w", notFound())
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{"merchantId": strAV(q.MerchantID), "createdAt": strAV(c.CreatedAt),
			"id": &types.AttributeValueMemberN{Value: c.ID}}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 25
	}
	var reqs []*payment.Request
	// A filter may leave pages short: read on, a bounded number of pages.
	for pages := 0; pages < 10; pages++ {
		in.Limit = aws.Int32(int32(limit - len(reqs)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", fmt.Errorf("query payment requests of merchant: %w", err)
		}
		for _, it := range out.Items {
			r, err := unmarshalRequest(it)
			if err != nil {
				return nil, "", err
			}
			reqs = append(reqs, r)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return reqs, "", nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
		if len(reqs) >= limit {
			break
		}
	}
	var c pageCursor
	if v, ok := in.ExclusiveStartKey["createdAt"].(*types.AttributeValueMemberS); ok {
		c.CreatedAt = v.Value
	}
	if v, ok := in.ExclusiveStartKey["id"].(*types.AttributeValueMemberN); ok {
		c.ID = v.Value
	}
	b, _ := json.Marshal(c)
	return reqs, base64.RawURLEncoding.EncodeToString(b), nil
}
