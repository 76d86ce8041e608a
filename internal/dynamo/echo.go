package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// WriteIDAttr is the attribute in which every PutItem and UpdateItem the
// store sends leaves a fresh random id (docs/lost-answers.md).
//
// DynamoDB may apply a write and lose its answer (a timeout, a 500, a
// connection dropped after the commit). The SDK then sends the same call
// again, and that retry meets the first attempt's write: a conditional
// create finds "its" item already there, a guarded update finds the state it
// set itself. The store recognises that echo instead of reporting "exists"
// or "conflict":
//
//   - every PutItem and UpdateItem stamps the item with a write id drawn
//     for this call (kept across the SDK's retries of the call);
//   - every UpdateItem is also conditional on the item not carrying that
//     id already, so a retry never applies an update twice (an ADD counter
//     counts once);
//   - every conditional write asks for the item as it stands when the
//     condition fails (ReturnValuesOnConditionCheckFailure ALL_OLD). When
//     that item carries this call's write id, the write is this call's
//     own, applied by an earlier attempt: the call succeeds, and an update
//     that asked for its new values gets them from that item.
//
// TransactWriteItems needs none of this: the SDK fills ClientRequestToken
// once per call and DynamoDB answers a replay of the token with success
// without applying it again. DeleteItem leaves nothing to recognise: the
// deletes that decide something (single-use links) are written as
// conditional updates instead.
const WriteIDAttr = "writeId"

const (
	widName  = "#pqWriteID"
	widValue = ":pqWriteID"
	// echoGuard holds only when this call's write is not yet on the item.
	echoGuard = "(attribute_not_exists(" + widName + ") OR " + widName + " <> " + widValue + ")"
)

// recogniseEcho is the store's DynamoDB client seen from the store: every
// single-item write stamped and its echo recognised (WriteIDAttr).
type recogniseEcho struct {
	API
}

// recogniseEchoBatch keeps the wrapped client's BatchWriteItem, which
// CompleteBatchRows looks for (its puts and deletes are unconditional and
// repeat harmlessly).
type recogniseEchoBatch struct {
	recogniseEcho
	batchWriter
}

func withEchoes(db API) API {
	r := recogniseEcho{API: db}
	if bw, ok := db.(batchWriter); ok {
		return recogniseEchoBatch{r, bw}
	}
	return r
}

// newWriteID is 128 random bits: two calls never draw the same one.
func newWriteID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ownEcho reports whether a failed condition met this call's own write.
func ownEcho(err error, id string) (map[string]types.AttributeValue, bool) {
	var cf *types.ConditionalCheckFailedException
	if !errors.As(err, &cf) || cf.Item == nil {
		return nil, false
	}
	v, ok := cf.Item[WriteIDAttr].(*types.AttributeValueMemberS)
	return cf.Item, ok && v.Value == id
}

func (r recogniseEcho) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	id := newWriteID()
	stamped := *in
	stamped.Item = maps.Clone(in.Item)
	stamped.Item[WriteIDAttr] = &types.AttributeValueMemberS{Value: id}
	if in.ConditionExpression == nil {
		// An unconditional put repeated writes the same item again.
		return r.API.PutItem(ctx, &stamped, opts...)
	}
	stamped.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := r.API.PutItem(ctx, &stamped, opts...)
	if _, own := ownEcho(err, id); own {
		// PutItem's ReturnValues can only ask for the item it replaced,
		// which the echo no longer shows; no caller asks for it.
		return &dynamodb.PutItemOutput{}, nil
	}
	return out, err
}

// setClause finds the SET keyword of an update expression. SET, REMOVE, ADD
// and DELETE are DynamoDB reserved words, never bare attribute names, so a
// whole-word match is the clause.
var setClause = regexp.MustCompile(`(?i)(^|\s)SET\s`)

func (r recogniseEcho) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	switch in.ReturnValues {
	case types.ReturnValueAllOld, types.ReturnValueUpdatedOld:
		// An echo cannot tell what the item was before this call's own
		// first attempt.
		return nil, fmt.Errorf("dynamo: UpdateItem with ReturnValues %s cannot recognise its own retried write", in.ReturnValues)
	}
	id := newWriteID()
	stamped := *in
	expr := aws.ToString(in.UpdateExpression)
	if loc := setClause.FindStringIndex(expr); loc != nil {
		expr = expr[:loc[1]] + widName + " = " + widValue + ", " + expr[loc[1]:]
	} else {
		expr += " SET " + widName + " = " + widValue
	}
	stamped.UpdateExpression = &expr
	cond := echoGuard
	if in.ConditionExpression != nil {
		cond = parenthesized(*in.ConditionExpression) + " AND " + echoGuard
	}
	stamped.ConditionExpression = &cond
	stamped.ExpressionAttributeNames = maps.Clone(in.ExpressionAttributeNames)
	if stamped.ExpressionAttributeNames == nil {
		stamped.ExpressionAttributeNames = map[string]string{}
	}
	stamped.ExpressionAttributeNames[widName] = WriteIDAttr
	stamped.ExpressionAttributeValues = maps.Clone(in.ExpressionAttributeValues)
	if stamped.ExpressionAttributeValues == nil {
		stamped.ExpressionAttributeValues = map[string]types.AttributeValue{}
	}
	stamped.ExpressionAttributeValues[widValue] = &types.AttributeValueMemberS{Value: id}
	stamped.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := r.API.UpdateItem(ctx, &stamped, opts...)
	if item, own := ownEcho(err, id); own {
		// The item as it stands is this call's result (ALL_NEW; for
		// UPDATED_NEW a superset of it).
		res := &dynamodb.UpdateItemOutput{}
		if in.ReturnValues == types.ReturnValueAllNew || in.ReturnValues == types.ReturnValueUpdatedNew {
			res.Attributes = item
		}
		return res, nil
	}
	return out, err
}

// parenthesized wraps a condition in parentheses unless it is wrapped
// already: DynamoDB refuses redundant parentheses.
func parenthesized(cond string) string {
	cond = strings.TrimSpace(cond)
	if strings.HasPrefix(cond, "(") {
		depth := 0
		for i, c := range cond {
			switch c {
			case '(':
				depth++
			case ')':
				depth--
			}
			if depth == 0 {
				if i == len(cond)-1 {
					return cond
				}
				break
			}
		}
	}
	return "(" + cond + ")"
}
