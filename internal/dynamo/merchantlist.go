package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/merchant"
)

// Merchants lists every merchant (a paginated Scan: an operator's listing,
// never on a payment path). Items without an API key hash are not merchants
// and are skipped, should the table ever hold other records.
func (s *Store) Merchants(ctx context.Context) ([]*merchant.Merchant, error) {
	var out []*merchant.Merchant
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{
		TableName:        &s.t.Merchants,
		FilterExpression: aws.String("attribute_exists(apiKeyHash)"),
		ConsistentRead:   aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan merchants: %w", err)
		}
		for _, item := range page.Items {
			m, err := unmarshalMerchant(item)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	return out, nil
}
