package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// consistentScan visits every item of table matching filter (empty: all),
// page by page, with strongly consistent reads (small tables and tools
// only: the audit reads a table in segments, auditpass.go).
func (s *Store) consistentScan(ctx context.Context, table, filter string, vals map[string]types.AttributeValue, visit func(map[string]types.AttributeValue) error) error {
	in := &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)}
	if filter != "" {
		in.FilterExpression, in.ExpressionAttributeValues = aws.String(filter), vals
	}
	for {
		out, err := s.db.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("scan %s: %w", table, err)
		}
		for _, it := range out.Items {
			if err := visit(it); err != nil {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
