package dashboardwire

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/mail"
	"github.com/payreq/payreq/internal/testing/motoserver"
)

func awsAt(endpoint string) aws.Config {
	return aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(endpoint), RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		})}
}

func env(kv map[string]string) config.Getenv { return func(k string) string { return kv[k] } }

// The wiring picks the local mailbox on the local stack only, SES from a
// sender address, and nothing without one; building the SES client makes no
// network call (Lambda's start-up).
func TestInvitationMailerChoice(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	dir := t.TempDir()
	local := config.Config{Local: true}
	for _, c := range []struct {
		name string
		cfg  config.Config
		env  map[string]string
		want string
	}{
		{"local mailbox", local, map[string]string{"MAIL_DIR": dir, "INVITATION_SENDER": "invitations@payreq.example"}, "mail.Dir"},
		{"MAIL_DIR off the local stack", config.Config{}, map[string]string{"MAIL_DIR": dir, "INVITATION_SENDER": "invitations@payreq.example"}, "*dashboardwire.SESMailer"},
		{"SES", config.Config{}, map[string]string{"INVITATION_SENDER": "invitations@payreq.example"}, "*dashboardwire.SESMailer"},
		{"no sender", config.Config{}, map[string]string{}, "<nil>"},
		{"a display name", config.Config{}, map[string]string{"INVITATION_SENDER": "PayReq <invitations@payreq.example>"}, "error"},
	} {
		m, err := invitationMailer(c.cfg, awsAt(srv.URL), env(c.env))
		got := typeName(m)
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, got, err, c.want)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("building the mailers made %d network calls, want none", n)
	}
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "<nil>"
	case mail.Dir:
		return "mail.Dir"
	case *SESMailer:
		return "*dashboardwire.SESMailer"
	}
	return "?"
}

// The SES adapter over SES v2's wire protocol (moto_server): a sender that
// is no verified identity is refused and the error says so; once its
// domain is verified, the message arrives as sent (plain text, UTF-8
// subject); a SES that does not answer is given up within the timeout.
func TestSESMailerSendsThroughSESv2(t *testing.T) {
	moto := motoserver.Start(t)
	cfg := awsAt(moto)
	m, err := invitationMailer(config.Config{}, cfg, env(map[string]string{"INVITATION_SENDER": "invitations@payreq.example"}))
	if err != nil {
		t.Fatal(err)
	}
	msg := mail.Message{To: "ana@shop.example", Subject: "Invitation to Cedar Street Café on the PayReq dashboard",
		Text: "Open this link to accept:\n\nhttps://pay.example/dashboard/set-password?token=T\n"}
	ctx := context.Background()
	if err := m.Send(ctx, msg); err == nil || !strings.Contains(err.Error(), "MessageRejected") {
		t.Fatalf("an unverified sender: %v, want SES's MessageRejected", err)
	}
	if _, err := sesv2.NewFromConfig(cfg).CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String("payreq.example")}); err != nil {
		t.Fatal(err)
	}
	if err := m.Send(ctx, msg); err != nil {
		t.Fatalf("send from a verified domain: %v", err)
	}
	resp, err := http.Get(moto + "/moto-api/data.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var data struct {
		SES struct {
			Message []struct {
				Source       string              `json:"source"`
				Subject      string              `json:"subject"`
				Body         string              `json:"body"`
				Destinations map[string][]string `json:"destinations"`
			} `json:"Message"`
		} `json:"ses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		t.Fatal(err)
	}
	if got := data.SES.Message; len(got) != 1 || got[0].Source != "invitations@payreq.example" || got[0].Subject != msg.Subject ||
		got[0].Body != msg.Text || len(got[0].Destinations["ToAddresses"]) != 1 || got[0].Destinations["ToAddresses"][0] != msg.To {
		t.Fatalf("SES holds %+v", got)
	}

	// A SES that takes the request and never answers.
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	slow := &SESMailer{Client: sesv2.NewFromConfig(awsAt(srv.URL)), From: "invitations@payreq.example", Timeout: 300 * time.Millisecond}
	start := time.Now()
	if err := slow.Send(ctx, msg); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("a SES that does not answer: %v after %v, want an error within the timeout", err, time.Since(start))
	}
}
