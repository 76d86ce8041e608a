package merchant

import "github.com/payreq/payreq/internal/payment"

// NotificationSubject is what a notification to a merchant is built from:
// its transaction, payment request and the merchant, each nil when missing
// (the notifier checks that the three belong together).
type NotificationSubject struct {
	Transaction *payment.Transaction
	Request     *payment.Request
	Merchant    *Merchant
}
