package dynamo_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/errkind"
)

// Users stored before per-merchant identities (pk "dashuser#<email>", sk
// "user", plus an index item) move to their merchant's key with every field
// kept; a second run moves nothing; a user already at the new key keeps it.
func TestMigrateDashboardUsersMovesAddressKeyedUsers(t *testing.T) {
	s, _, client, tables := newStore(t)
	ctx := context.Background()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	merchant, email := "mer_mig"+suffix, "legacy."+suffix+"@shop.example"
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	num := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tables.Operations, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	put(map[string]types.AttributeValue{"pk": str("dashuser#" + email), "sk": str("user"), "email": str(email), "merchantId": str(merchant),
		"role": str("admin"), "passwordHash": str("$argon2id$legacy"), "sealedTotp": str("sealed"), "totpStep": num("7"), "failures": num("2"),
		"createdAt": str(created.Format(time.RFC3339Nano)), "updatedAt": str(created.Format(time.RFC3339Nano)), "version": num("4")})
	put(map[string]types.AttributeValue{"pk": str("dashusers#" + merchant), "sk": str(email), "role": str("admin")})

	if _, err := s.DashboardUser(ctx, merchant, email); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("before the migration: %v", err)
	}
	n, err := s.MigrateDashboardUsers(ctx)
	if err != nil || n < 1 {
		t.Fatalf("migrate: %d, %v", n, err)
	}
	u, err := s.DashboardUser(ctx, merchant, email)
	if err != nil {
		t.Fatal(err)
	}
	if u.Role != "admin" || u.PasswordHash != "$argon2id$legacy" || u.SealedTOTP != "sealed" || u.TOTPStep != 7 ||
		!u.CreatedAt.Equal(created) || u.Version != 4 {
		t.Errorf("migrated user: %+v", u)
	}
	for _, key := range [][2]string{{"dashuser#" + email, "user"}, {"dashusers#" + merchant, email}} {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Operations, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": str(key[0]), "sk": str(key[1])}})
		if err != nil || out.Item != nil {
			t.Errorf("old item %v left: %v", key, err)
		}
	}
	list, err := s.DashboardUsers(ctx, merchant)
	if err != nil || len(list) != 1 || list[0].Email != email {
		t.Errorf("the merchant's list: %v %v", list, err)
	}
	// A stale old copy of a user already at the new key is dropped, the new one kept.
	put(map[string]types.AttributeValue{"pk": str("dashuser#" + email), "sk": str("user"), "email": str(email), "merchantId": str(merchant),
		"role": str("member"), "createdAt": str(created.Format(time.RFC3339Nano)), "updatedAt": str(created.Format(time.RFC3339Nano)), "version": num("1")})
	if _, err := s.MigrateDashboardUsers(ctx); err != nil {
		t.Fatal(err)
	}
	if u, err := s.DashboardUser(ctx, merchant, email); err != nil || u.Role != "admin" || u.Version != 4 {
		t.Errorf("after a stale copy: %+v %v", u, err)
	}
}
