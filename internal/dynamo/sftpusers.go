package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/sftpuser"
)

// SFTP users live in the operations table, one item per user name:
// pk "sftpuser#<username>", sk "user". The identity provider needs exactly one
// GetItem per login, by user name. The user name of a merchant is its
// merchant id (see SFTPUsername), so operators and the dashboard find a
// merchant's user without an index. Nothing here expires.
const (
	sftpUserPrefix = "sftpuser#"
	sftpUserSK     = "user"
	// MaxSFTPKeys bounds the public keys of one user.
	MaxSFTPKeys = 10
)

// SFTPUsername is the SFTP user name of a merchant: its id, which already
// satisfies Transfer Family's user name rules ([A-Za-z0-9_][A-Za-z0-9_@.-]{2,99}).
func SFTPUsername(merchantID string) string { return merchantID }

func sftpUserKey(username string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: sftpUserPrefix + username},
		"sk": &types.AttributeValueMemberS{Value: sftpUserSK},
	}
}

// SFTPUserRecord loads a user; NotFound when there is none.
func (s *Store) SFTPUserRecord(ctx context.Context, username string) (*sftpuser.User, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Operations, Key: sftpUserKey(username), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get sftp user %s: %w", username, err)
	}
	if out.Item == nil {
		return nil, notFound()
	}
	var u sftpuser.User
	if err := attributevalue.UnmarshalMap(out.Item, &u); err != nil {
		return nil, fmt.Errorf("unmarshal sftp user %s: %w", username, err)
	}
	u.Username = username
	return &u, nil
}

// SFTPUser implements sftpuser.Store: *Store is the identity provider's
// user store in Lambda and in the local SFTP server.
func (s *Store) SFTPUser(ctx context.Context, username string) (sftpuser.User, error) {
	u, err := s.SFTPUserRecord(ctx, username)
	if errkind.Is(err, errkind.NotFound) {
		return sftpuser.User{}, notFound()
	}
	if err != nil {
		return sftpuser.User{}, err
	}
	return *u, nil
}

// SetSFTPPassword creates the merchant's user or replaces its password hash
// (keys are kept). The user name may only ever belong to merchantID.
func (s *Store) SetSFTPPassword(ctx context.Context, merchantID, username, hash string, now time.Time) error {
	if hash == "" {
		return errors.New("set sftp password: empty hash")
	}
	now = now.UTC()
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.t.Operations,
		Key:                 sftpUserKey(username),
		UpdateExpression:    aws.String("SET merchantId = :m, passwordHash = :h, passwordUpdatedAt = :now, updatedAt = :now, createdAt = if_not_exists(createdAt, :now)"),
		ConditionExpression: aws.String("attribute_not_exists(pk) OR merchantId = :m"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":m": &types.AttributeValueMemberS{Value: merchantID}, ":h": &types.AttributeValueMemberS{Value: hash},
			":now": &types.AttributeValueMemberS{Value: now.Format(time.RFC3339Nano)},
		},
	})
	if isConditionFailed(err) {
		return fmt.Errorf("sftp user %s belongs to another merchant: %w", username, conflict(err))
	}
	if err != nil {
		return fmt.Errorf("set sftp password of %s: %w", username, err)
	}
	return nil
}

// AddSFTPKey registers a public key (an authorized_keys line, normalised by
// the caller) for the merchant's user, creating the user when needed. Adding
// a key that is already registered changes nothing and returns exists(err).
func (s *Store) AddSFTPKey(ctx context.Context, merchantID, username, key string, now time.Time) error {
	now = now.UTC()
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Operations,
		Key:       sftpUserKey(username),
		UpdateExpression: aws.String("SET merchantId = :m, publicKeys = list_append(if_not_exists(publicKeys, :empty), :k), " +
			"updatedAt = :now, createdAt = if_not_exists(createdAt, :now)"),
		ConditionExpression: aws.String("attribute_not_exists(pk) OR (merchantId = :m AND " +
			"(attribute_not_exists(publicKeys) OR (NOT contains(publicKeys, :ks) AND size(publicKeys) < :max)))"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":m":     &types.AttributeValueMemberS{Value: merchantID},
			":k":     &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: key}}},
			":ks":    &types.AttributeValueMemberS{Value: key},
			":empty": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
			":max":   numberAV(MaxSFTPKeys),
			":now":   &types.AttributeValueMemberS{Value: now.Format(time.RFC3339Nano)},
		},
	})
	if isConditionFailed(err) {
		// Tell the three refusals apart with one read (off the happy path).
		u, gerr := s.SFTPUserRecord(ctx, username)
		switch {
		case gerr != nil:
			return gerr
		case u.MerchantID != merchantID:
			return fmt.Errorf("sftp user %s belongs to another merchant: %w", username, conflict(err))
		case len(u.PublicKeys) >= MaxSFTPKeys:
			return fmt.Errorf("sftp user %s already has %d keys: %w", username, MaxSFTPKeys, conflict(err))
		}
		return exists(err)
	}
	if err != nil {
		return fmt.Errorf("add sftp key to %s: %w", username, err)
	}
	return nil
}

// RemoveSFTPKey removes one public key of the merchant's user; NotFound
// when the key is not registered. The removal is guarded by the key still
// being at the position read, so a concurrent change never removes another key.
func (s *Store) RemoveSFTPKey(ctx context.Context, merchantID, username, key string, now time.Time) error {
	for range 3 {
		u, err := s.SFTPUserRecord(ctx, username)
		if err != nil {
			return err
		}
		if u.MerchantID != merchantID {
			return notFound()
		}
		i := -1
		for j, k := range u.PublicKeys {
			if k == key {
				i = j
			}
		}
		if i < 0 {
			return notFound()
		}
		pos := fmt.Sprintf("publicKeys[%d]", i)
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           &s.t.Operations,
			Key:                 sftpUserKey(username),
			UpdateExpression:    aws.String("REMOVE " + pos + " SET updatedAt = :now"),
			ConditionExpression: aws.String("merchantId = :m AND " + pos + " = :k"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":m": &types.AttributeValueMemberS{Value: merchantID}, ":k": &types.AttributeValueMemberS{Value: key},
				":now": &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
			},
		})
		if !isConditionFailed(err) {
			if err != nil {
				return fmt.Errorf("remove sftp key of %s: %w", username, err)
			}
			return nil
		}
	}
	return conflict(nil)
}
