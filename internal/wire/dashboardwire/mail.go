package dashboardwire

import (
	"context"
	"fmt"
	"net/mail"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/dashboard"
	paymail "github.com/payreq/payreq/internal/mail"
)

// sendTimeout bounds one invitation e-mail's SendEmail, the SDK's retries
// included: the admin's request waits for it (the dashboard answers after
// the send, so a failure is shown, never dropped), within the function's
// 10 s (the dashboard also stops it before the request's deadline).
const sendTimeout = 6 * time.Second

// invitationMailer is the dashboard's mailer: the local stack's mailbox
// directory (MAIL_DIR, honoured on the local stack only), else Amazon SES
// from INVITATION_SENDER, else none (the dashboard then invites nobody).
// Building the SES client makes no network call: Lambda's start-up stays
// as fast, and the first invitation resolves the endpoint.
func invitationMailer(cfg config.Config, awsCfg aws.Config, getenv config.Getenv) (dashboard.Mailer, error) {
	if dir := getenv("MAIL_DIR"); cfg.Local && dir != "" {
		return paymail.Dir(dir), nil
	}
	sender := getenv("INVITATION_SENDER")
	if sender == "" {
		return nil, nil
	}
	if a, err := mail.ParseAddress(sender); err != nil || a.Address != sender {
		return nil, fmt.Errorf("INVITATION_SENDER %q: want a bare e-mail address (a verified SES identity)", sender)
	}
	return &SESMailer{Client: sesv2.NewFromConfig(awsCfg), From: sender, Timeout: sendTimeout}, nil
}

// SESMailer sends a plain-text message with Amazon SES v2's SendEmail
// (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html)
// from From, a verified identity of the account, waiting at most Timeout.
// The error it returns is SES's (which never quotes the message's text).
type SESMailer struct {
	Client  *sesv2.Client
	From    string
	Timeout time.Duration
}

func (m *SESMailer) Send(ctx context.Context, msg paymail.Message) error {
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	utf8 := aws.String("UTF-8")
	_, err := m.Client.SendEmail(ctx, &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(m.From),
		Destination:      &types.Destination{ToAddresses: []string{msg.To}},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String(msg.Subject), Charset: utf8},
			Body:    &types.Body{Text: &types.Content{Data: aws.String(msg.Text), Charset: utf8}},
		}},
	})
	if err != nil {
		return fmt.Errorf("ses SendEmail to %s: %w", msg.To, err)
	}
	return nil
}
