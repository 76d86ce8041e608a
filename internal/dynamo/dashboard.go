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
//	pk "dashid#<email>"           sk "identity"       a person: password, second factor (identities.go)
//	pk "dashid#<email>"           sk "m#<merchantId>" the person's membership of a merchant (authoritative)
//	pk "dashroster#<merchantId>"  sk "<email>"        the merchant's copy of it (its member list)
//	pk "dashsess#<sha256(id)>"    sk "session"        a session, expiresAt = TTL
//	pk "dashinvite#<sha256(t)>"   sk "invite"         an invitation or password link, expiresAt = TTL
//	pk "dashaudit#<merchantId>"   sk "<time>#<r>"     the merchant's audit log
//	pk "dashlock#<merchantId>"    sk "users"          lease serialising role changes and removals
//
// Users stored before identities — per merchant (pk "dashmuser#<merchantId>",
// sk "<email>"), or earlier per address (pk "dashuser#<email>", sk "user",
// with an index item pk "dashusers#<merchantId>") — become memberships of
// one identity per address through MigrateDashboardUsers.
//
// Payment requests are listed per merchant through the payment requests
// table's byMerchantCreated index (merchantId, createdAt).
const (
	dashIdentityPrefix = "dashid#"
	dashRosterPrefix   = "dashroster#"
	legacyMUserPrefix  = "dashmuser#"
	legacyUserPrefix   = "dashuser#"
	legacyUsersPrefix  = "dashusers#"
	dashSessionPrefix  = "dashsess#"
	dashInvitePrefix   = "dashinvite#"
	dashAuditPrefix    = "dashaudit#"
	dashLockPrefix     = "dashlock#"
	// MerchantCreatedIndex lists a merchant's payment requests by creation time.
	MerchantCreatedIndex = "byMerchantCreated"
	auditRetention       = 400 * 24 * time.Hour
)

func dashKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": strAV(pk), "sk": strAV(sk)}
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
	MerchantID  string    `dynamodbav:"merchantId,omitempty"` // the merchant last chosen
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
		MerchantID: ss.MerchantID, CSRF: ss.CSRF, TOTPPending: ss.TOTPPending, UserSince: ss.UserSince.UTC(), CredVersion: ss.CredVersion, CreatedAt: ss.CreatedAt.UTC(),
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
	return &dashuser.Session{IDHash: idHash, Email: r.Email, MerchantID: r.MerchantID, CSRF: r.CSRF,
		TOTPPending: r.TOTPPending, UserSince: r.UserSince, CredVersion: r.CredVersion, CreatedAt: r.CreatedAt, LastSeen: seen, ExpiresAt: r.Expires}, nil
}

// SetSessionMerchant records the merchant a live session last chose (the
// switcher); it never recreates a deleted session (absent is not an error).
func (s *Store) SetSessionMerchant(ctx context.Context, idHash, merchantID string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.t.Operations, Key: dashKey(dashSessionPrefix+idHash, "session"),
		UpdateExpression:          aws.String("SET merchantId = :m"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":m": strAV(merchantID)}})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("set session merchant: %w", err)
	}
	return nil
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

// PutInvite stores a one-time link (an invitation or a password reset).
func (s *Store) PutInvite(ctx context.Context, inv *dashuser.Invite) error {
	item := dashKey(dashInvitePrefix+inv.TokenHash, "invite")
	item["kind"], item["email"], item["createdBy"] = strAV(inv.Kind), strAV(inv.Email), strAV(inv.CreatedBy)
	if inv.MerchantID != "" {
		item["merchantId"], item["role"] = strAV(inv.MerchantID), strAV(inv.Role)
	}
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
		Kind       string `dynamodbav:"kind"`
		Email      string `dynamodbav:"email"`
		MerchantID string `dynamodbav:"merchantId"`
		Role       string `dynamodbav:"role"`
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
	if r.Kind == "" { // a link of a per-merchant user, before identities
		r.Kind = dashuser.LinkInvite
	}
	return &dashuser.Invite{TokenHash: tokenHash, Kind: r.Kind, Email: r.Email, MerchantID: r.MerchantID, Role: r.Role,
		CreatedBy: r.CreatedBy, ExpiresAt: exp}, nil
}

// AppendAudit records a change to a merchant's settings, keys or users.
func (s *Store) AppendAudit(ctx context.Context, e dashuser.AuditEntry) error {
	return s.putIfAbsent(ctx, s.t.Operations, "pk", s.auditItem(e), "audit entry")
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
