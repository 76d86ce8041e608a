package dynamo

import (
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/payment"
)

// update builds an UpdateItem expression. Every attribute name is aliased
// ("#name"), so reserved words (status, state) need no special care, and
// every value gets a generated placeholder (":v0", ":v1", …); conditions may
// refer to the aliases of names the update sets.
type update struct {
	sets, removes []string
	names         map[string]string
	values        map[string]types.AttributeValue
}

func (u *update) name(n string) string {
	if u.names == nil {
		u.names = map[string]string{}
	}
	alias := "#" + n
	u.names[alias] = n
	return alias
}

func (u *update) value(v types.AttributeValue) string {
	if u.values == nil {
		u.values = map[string]types.AttributeValue{}
	}
	ph := ":v" + strconv.Itoa(len(u.values))
	u.values[ph] = v
	return ph
}

func (u *update) set(n string, v types.AttributeValue) *update {
	u.sets = append(u.sets, u.name(n)+" = "+u.value(v))
	return u
}

// setOnce sets n only where it is absent: a value written once is never
// overwritten (the acquirer object id of a transaction).
func (u *update) setOnce(n string, v types.AttributeValue) *update {
	a := u.name(n)
	u.sets = append(u.sets, a+" = if_not_exists("+a+", "+u.value(v)+")")
	return u
}

func (u *update) setOrRemove(n string, v types.AttributeValue, present bool) {
	if present {
		u.set(n, v)
	} else {
		u.remove(n)
	}
}

func (u *update) remove(names ...string) *update {
	for _, n := range names {
		u.removes = append(u.removes, u.name(n))
	}
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
	if u.values == nil {
		u.values = map[string]types.AttributeValue{}
	}
	for k, v := range vals {
		u.values[k] = v
	}
	return nil
}

func (u *update) expression() string {
	var b strings.Builder
	if len(u.sets) > 0 {
		b.WriteString("SET " + strings.Join(u.sets, ", "))
	}
	if len(u.removes) > 0 {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString("REMOVE " + strings.Join(u.removes, ", "))
	}
	return b.String()
}

// input is the UpdateItem of u on key of table, its maps ready for a
// condition's names and values to be added.
func (u *update) input(table string, key map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	if u.names == nil {
		u.names = map[string]string{}
	}
	if u.values == nil {
		u.values = map[string]types.AttributeValue{}
	}
	expr := u.expression()
	return &dynamodb.UpdateItemInput{TableName: &table, Key: key, UpdateExpression: &expr,
		ExpressionAttributeNames: u.names, ExpressionAttributeValues: u.values}
}
