package dynamo

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/payment"
)

// update builds an UpdateItem expression: SET and REMOVE clauses with
// generated value placeholders. Attribute names starting with '#' are
// placeholders the caller maps (only "#status" is used: status is reserved).
type update struct {
	sets    []string
	removes []string
	vals    map[string]types.AttributeValue
}

func newUpdate() *update { return &update{vals: map[string]types.AttributeValue{}} }

func (u *update) set(name string, v types.AttributeValue) *update {
	ph := fmt.Sprintf(":u%d", len(u.vals))
	u.vals[ph] = v
	u.sets = append(u.sets, name+" = "+ph)
	return u
}

func (u *update) remove(names ...string) *update {
	u.removes = append(u.removes, names...)
	return u
}

// outbox adds the outbox entry of ev (notifyShard, notifyDueAt, notifyEvent):
// the write that makes a transaction final carries its notification.
func (u *update) outbox(ev payment.NotifyEvent, now time.Time) error {
	set, vals, err := OutboxSet(ev, now)
	if err != nil {
		return err
	}
	u.sets = append(u.sets, set)
	for k, v := range vals {
		u.vals[k] = v
	}
	return nil
}

func (u *update) input(table string, key map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	expr := ""
	if len(u.sets) > 0 {
		expr = "SET " + strings.Join(u.sets, ", ")
	}
	if len(u.removes) > 0 {
		expr += " REMOVE " + strings.Join(u.removes, ", ")
	}
	names := map[string]string{}
	if strings.Contains(expr, "#status") {
		names["#status"] = "status"
	}
	return &dynamodb.UpdateItemInput{TableName: &table, Key: key, UpdateExpression: &expr,
		ExpressionAttributeNames: names, ExpressionAttributeValues: u.vals}
}
