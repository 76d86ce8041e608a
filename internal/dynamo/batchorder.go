package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// OpenBatchJobsOf lists merchantID's open-job markers (strongly
// consistent), so a job can wait for the merchant's older files: a
// merchant's files are charged in upload order.
func (s *Store) OpenBatchJobsOf(ctx context.Context, merchantID string) ([]OpenBatchJob, error) {
	in := &dynamodb.QueryInput{
		TableName:              &s.t.Operations,
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :m)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: batchOpenPK}, ":m": &types.AttributeValueMemberS{Value: merchantID + "#"}},
		ConsistentRead: aws.Bool(true),
	}
	var open []OpenBatchJob
	p := dynamodb.NewQueryPaginator(s.queryAPI(), in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query open batch jobs of %s: %w", merchantID, err)
		}
		for _, item := range out.Items {
			sk, _ := item["sk"].(*types.AttributeValueMemberS)
			if sk == nil {
				continue
			}
			_, job, ok := strings.Cut(sk.Value, "#")
			if !ok {
				continue
			}
			o := OpenBatchJob{MerchantID: merchantID, JobID: job}
			if n, ok := item["since"].(*types.AttributeValueMemberN); ok {
				if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
					o.Since = time.UnixMilli(ms)
				}
			}
			open = append(open, o)
		}
	}
	return open, nil
}
