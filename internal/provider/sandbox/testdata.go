package sandbox

import (
	"strings"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// Flow is how the final status of a test attempt arrives.
type Flow string

const (
	// Immediate: the payment response already carries the final status.
	Immediate Flow = "immediate"
	// Challenge: pending; the payer answers the 3-D Secure challenge page.
	Challenge Flow = "challenge"
	// Callback: pending; the sandbox reports the final status later through
	// a signed callback to the service's /callbacks endpoints.
	Callback Flow = "callback"
)

// Answer is the button pressed on the sandbox 3-D Secure challenge page.
type Answer string

const (
	AnswerApprove Answer = "approve"
	AnswerFail    Answer = "fail"
)

// DeclineEmail as the payer e-mail declines QR and alternative-method
// attempts with 999; any other e-mail approves them.
const DeclineEmail = "decline@example.com"

// TestCase is one published sandbox input and what it leads to. Docs and
// integration tests iterate TestData so they cannot drift from the sandbox.
type TestCase struct {
	Method provider.Method
	// Input is the card number as printed (with spaces), the wallet token,
	// the UPI id, or the payer e-mail for QR and alternative methods.
	Input string
	Class string // the spec's outcome class where it names one
	// Batch marks a card charged from a batch file: no cardholder is
	// present, so a challenge cannot happen.
	Batch  bool
	Answer Answer // the challenge button pressed, for Flow Challenge
	Flow   Flow
	First  provider.Status // transactionStatusId in the payment response
	Status provider.Status // final transactionStatusId
	Code   codes.Code      // final lastLog.code; "" when approved
	// Held marks an input that stays pending for Options.PendingHold
	// (minutes) before its final status.
	Held bool
}

// effect is what a test input does to an attempt.
type effect struct {
	flow           Flow
	status         provider.Status // final status; for a challenge, when approved
	code           codes.Code
	alwaysFails    bool // a challenge that declines whatever the payer answers
	collectTimeout bool // the callback comes when the UPI collect window closes
	held           bool // the callback comes after Options.PendingHold
}

// Effect constructors, named for how the tables below read.

func approve() effect             { return effect{flow: Immediate, status: provider.Approved} }
func decline(c codes.Code) effect { return effect{flow: Immediate, status: provider.Declined, code: c} }
func challenge() effect           { return effect{flow: Challenge, status: provider.Approved} }

func challengeAlwaysFails() effect {
	return effect{flow: Challenge, status: provider.Declined, code: codes.ThreeDSDecline, alwaysFails: true}
}

func later(s provider.Status, c codes.Code) effect {
	return effect{flow: Callback, status: s, code: c}
}

func collectTimeout() effect {
	e := later(provider.Declined, codes.AuthenticationTimeout)
	e.collectTimeout = true
	return e
}

// heldPending stays pending past the checkout page's wait, then approves.
func heldPending() effect {
	e := later(provider.Approved, "")
	e.held = true
	return e
}

type rule struct {
	input string
	class string
	effect
}

// The tables below are the sandbox's behaviour; TestData is derived from them.

// cards: docs/sandbox.md. Any other valid card number approves.
var cards = []rule{
	{"4111 1111 1111 1111", "success", approve()},
	{"4000 0000 0000 0002", "declined", decline(codes.DeclinedContactIssuer)},
	{"4000 0000 0000 0119", "processing error", decline(codes.BankSystemError)},
	{"4000 0000 0000 0127", "incorrect security code", decline(codes.SecurityCodeIncorrect)},
	{"4000 0000 0000 0069", "expired card", decline(codes.InvalidOrExpiredCard)},
	{"4000 0000 0000 3220", "3-D Secure required", challenge()},
	{"4000 0084 0000 1629", "3-D Secure failed", challengeAlwaysFails()},
	{"4000 0000 0000 3055", "3-D Secure unavailable", decline(codes.AuthenticationTimeout)},
}

// otherCard shows that numbers outside the table approve.
var otherCard = rule{"5555 5555 5555 4444", "success (any other valid card)", approve()}

// wallets mirror the card classes. Any other token is declined with 048.
var wallets = []rule{
	{"tok_success", "success", approve()},
	{"tok_declined", "declined", decline(codes.DeclinedContactIssuer)},
	{"tok_insufficient_funds", "insufficient funds", decline(codes.InsufficientFunds)},
	{"tok_processing_error", "processing error", decline(codes.BankSystemError)},
	{"tok_3ds_required", "3-D Secure required", challenge()},
	{"tok_3ds_failed", "3-D Secure failed", challengeAlwaysFails()},
	{"tok_3ds_unavailable", "3-D Secure unavailable", decline(codes.AuthenticationTimeout)},
}

var otherToken = rule{"tok_invalid", "invalid token (any other token)", decline(codes.InvalidToken)}

// upis: docs/sandbox.md, matched case-insensitively. Any other well-formed UPI id
// behaves like success@upi; a malformed one like invalid@upi.
var upis = []rule{
	{"success@upi", "UPI success", later(provider.Approved, "")},
	{"failure@upi", "UPI failed", later(provider.Declined, codes.DeclinedContactIssuer)},
	{"insufficient@upi", "UPI insufficient funds", later(provider.Declined, codes.InsufficientFunds)},
	{"timeout@upi", "UPI timeout", collectTimeout()},
	{"pending@upi", "UPI stays pending (5 minutes, then approved)", heldPending()},
	{"invalid@upi", "UPI invalid identifier", decline(codes.InvalidUPI)},
}

const approveEmail = "payer@example.com"

var (
	cardsByDigits  = index(cards, card.Normalize)
	walletsByToken = index(wallets, func(s string) string { return s })
	upiByID        = index(upis, strings.ToLower)
)

func index(rules []rule, key func(string) string) map[string]rule {
	m := make(map[string]rule, len(rules))
	for _, r := range rules {
		m[key(r.input)] = r
	}
	return m
}

// TestData lists every documented sandbox input with its result, in the
// order docs/sandbox.md presents them. A challenge input appears once per
// answer, and cards that need 3-D Secure appear again as batch rows.
func TestData() []TestCase {
	var out []TestCase
	add := func(m provider.Method, rules ...rule) {
		for _, r := range rules {
			out = append(out, cases(m, r)...)
		}
	}
	add(provider.MethodCard, cards...)
	add(provider.MethodCard, otherCard)
	for _, r := range cards {
		if r.flow == Challenge {
			out = append(out, TestCase{
				Method: provider.MethodCard, Input: r.input, Class: r.class + " (batch file)", Batch: true,
				Flow: Immediate, First: provider.Declined, Status: provider.Declined, Code: codes.ThreeDSDecline,
			})
		}
	}
	add(provider.MethodWallet, wallets...)
	add(provider.MethodWallet, otherToken)
	add(provider.MethodUPI, upis...)
	add(provider.MethodQR,
		rule{approveEmail, "QR paid (any other e-mail)", later(provider.Approved, "")},
		rule{DeclineEmail, "QR declined", later(provider.Declined, codes.DeclinedContactIssuer)})
	add(provider.MethodAlternative,
		rule{approveEmail, "success (any other e-mail)", approve()},
		rule{DeclineEmail, "declined", decline(codes.DeclinedContactIssuer)})
	return out
}

// cases expands one rule into the rows a tester can reproduce.
func cases(m provider.Method, r rule) []TestCase {
	tc := TestCase{Method: m, Input: r.input, Class: r.class, Flow: r.flow, Status: r.status, Code: r.code, Held: r.held}
	switch r.flow {
	case Immediate:
		tc.First = r.status
		return []TestCase{tc}
	case Callback:
		tc.First = provider.Pending
		return []TestCase{tc}
	}
	tc.First = provider.Pending
	approved, failed := tc, tc
	approved.Answer, failed.Answer = AnswerApprove, AnswerFail
	failed.Status, failed.Code = provider.Declined, codes.ThreeDSDecline
	return []TestCase{approved, failed}
}
