package adyen

import "github.com/payreq/payreq/internal/provider"

// OutcomeOfForTest maps a resultCode and refusalReasonCode as OutcomeOf
// does for an answer of Adyen's.
func OutcomeOfForTest(resultCode, refusalReasonCode string) provider.Outcome {
	return OutcomeOf(paymentResponse{ResultCode: resultCode, RefusalReasonCode: refusalReasonCode, PSPReference: "psp"})
}

// ExponentsForTest is the currency table: code → Adyen's decimals.
func ExponentsForTest() map[string]int32 { return adyenExponent }
