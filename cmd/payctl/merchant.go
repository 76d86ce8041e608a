package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/notify"
)

// merchantView is what payctl prints: settings, never a stored secret.
type merchantView struct {
	ID                 string          `json:"id"`
	Name               string          `json:"name"`
	Sandbox            bool            `json:"sandbox"`
	NotifyURL          string          `json:"notifyUrl,omitempty"`
	SuccessURL         string          `json:"successUrl,omitempty"`
	FailureURL         string          `json:"failureUrl,omitempty"`
	AllowedOrigins     []string        `json:"allowedOrigins"`
	Methods            []int           `json:"methods"`
	Limits             merchant.Limits `json:"limits"`
	RateLimitPerMinute int             `json:"rateLimitPerMinute"`
	NotificationFormat string          `json:"notificationFormat"`
	APIKeyPrefix       string          `json:"apiKeyPrefix"`
	CreatedAt          time.Time       `json:"createdAt"`
	UpdatedAt          time.Time       `json:"updatedAt"`
	Version            int64           `json:"version"`

	// Shown once, on create and rotate-key only.
	APIKey        string `json:"apiKey,omitempty"`
	WebhookSecret string `json:"webhookSecret,omitempty"`
	Notice        string `json:"notice,omitempty"`
}

func viewOf(m *merchant.Merchant) merchantView {
	format := m.NotificationFormat
	if format == "" {
		format = "form"
	}
	return merchantView{ID: m.ID, Name: m.Name, Sandbox: m.Sandbox, NotifyURL: m.NotifyURL, SuccessURL: m.SuccessURL,
		FailureURL: m.FailureURL, AllowedOrigins: nonNil(m.AllowedOrigins), Methods: nonNilInts(m.Methods), Limits: m.Limits,
		RateLimitPerMinute: m.RateLimit(), NotificationFormat: format, APIKeyPrefix: m.APIKeyPrefix,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Version: m.Version}
}

const shownOnce = "The API key and webhook secret are shown only now; store them in your secret manager."

func merchantCmd(ctx context.Context, g globals, sub string, args []string, stderr io.Writer) (any, error) {
	fs := flag.NewFlagSet("merchant "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "merchant id")
	s := bindSettings(fs)
	production := fs.Bool("production", false, "live merchant")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err.Error())
	}
	switch sub {
	case "create", "show", "update", "rotate-key":
	default:
		return nil, usageError(fmt.Sprintf("unknown merchant command %q", sub))
	}
	if sub != "create" && *id == "" {
		return nil, usageError("--id is required")
	}
	e, err := connect(ctx, g)
	if err != nil {
		return nil, err
	}
	switch sub {
	case "create":
		if *production && e.sandbox {
			return nil, errors.New("--production needs a production stack")
		}
		now := time.Now().UTC()
		m := &merchant.Merchant{ID: merchant.NewID(), Sandbox: e.sandbox, CreatedAt: now, UpdatedAt: now}
		if e.sandbox {
			m.Methods = merchant.AllSelectors()
		}
		if err := s.apply(fs, m); err != nil {
			return nil, err
		}
		if err := m.Validate(); err != nil {
			return nil, err
		}
		key, secret, err := newSecrets(e, m)
		if err != nil {
			return nil, err
		}
		if err := e.store.CreateMerchant(ctx, m); err != nil {
			return nil, err
		}
		v := viewOf(m)
		v.APIKey, v.WebhookSecret, v.Notice = key, secret, shownOnce
		return v, nil
	case "show":
		m, err := load(ctx, e, *id)
		if err != nil {
			return nil, err
		}
		return viewOf(m), nil
	case "update":
		return updateMerchant(ctx, e, *id, func(m *merchant.Merchant) error {
			if err := s.apply(fs, m); err != nil {
				return err
			}
			return m.Validate()
		})
	default: // rotate-key
		var key string
		v, err := updateMerchant(ctx, e, *id, func(m *merchant.Merchant) error {
			key = merchant.NewAPIKey(m.Sandbox)
			m.APIKeyHash, m.APIKeyPrefix, m.SealedAPIKey = merchant.HashAPIKey(key), merchant.KeyPrefix(key), e.sealer.Seal(key, m.ID)
			return nil
		})
		if err != nil {
			return nil, err
		}
		v.APIKey = key
		v.Notice = "The new API key is shown only now. The old key stops working within 30 seconds (API instances cache keys that long)."
		return v, nil
	}
}

func newSecrets(e *env, m *merchant.Merchant) (key, secret string, err error) {
	key = merchant.NewAPIKey(m.Sandbox)
	if secret, err = notify.NewWebhookSecret(); err != nil {
		return "", "", err
	}
	m.APIKeyHash, m.APIKeyPrefix = merchant.HashAPIKey(key), merchant.KeyPrefix(key)
	m.SealedAPIKey, m.SealedSecret = e.sealer.Seal(key, m.ID), e.sealer.Seal(secret, m.ID)
	return key, secret, nil
}

func load(ctx context.Context, e *env, id string) (*merchant.Merchant, error) {
	m, err := e.store.Merchant(ctx, id)
	if errors.Is(err, dynamo.ErrNotFound) {
		return nil, fmt.Errorf("merchant %s not found", id)
	}
	return m, err
}

// updateMerchant applies change with optimistic locking, retrying on a
// concurrent update so two operators never overwrite each other.
func updateMerchant(ctx context.Context, e *env, id string, change func(*merchant.Merchant) error) (merchantView, error) {
	for attempt := 0; attempt < 5; attempt++ {
		m, err := load(ctx, e, id)
		if err != nil {
			return merchantView{}, err
		}
		if err := change(m); err != nil {
			return merchantView{}, err
		}
		m.UpdatedAt = time.Now().UTC()
		err = e.store.UpdateMerchant(ctx, m)
		if errors.Is(err, dynamo.ErrConflict) {
			continue
		}
		if err != nil {
			return merchantView{}, err
		}
		return viewOf(m), nil
	}
	return merchantView{}, errors.New("merchant changed concurrently too often; retry")
}

// settings are the flags shared by create and update; only flags the
// operator actually set are applied.
type settings struct {
	name, notifyURL, successURL, failureURL, origins, methods      *string
	minAmount, maxAmount, dailyAmount, monthlyAmount, currs, ctrys *string
	dailyCount, monthlyCount                                       *int64
	rateLimit                                                      *int
	format                                                         *string
}

func bindSettings(fs *flag.FlagSet) *settings {
	return &settings{
		name: fs.String("name", "", ""), notifyURL: fs.String("notify-url", "", ""), successURL: fs.String("success-url", "", ""),
		failureURL: fs.String("failure-url", "", ""), origins: fs.String("allowed-origins", "", ""), methods: fs.String("methods", "", ""),
		minAmount: fs.String("min-amount", "", ""), maxAmount: fs.String("max-amount", "", ""), dailyAmount: fs.String("daily-amount", "", ""),
		monthlyAmount: fs.String("monthly-amount", "", ""), currs: fs.String("currencies", "", ""), ctrys: fs.String("countries", "", ""),
		dailyCount: fs.Int64("daily-count", 0, ""), monthlyCount: fs.Int64("monthly-count", 0, ""), rateLimit: fs.Int("rate-limit", 0, ""),
		format: fs.String("notification-format", "", ""),
	}
}

func (s *settings) apply(fs *flag.FlagSet, m *merchant.Merchant) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		switch f.Name {
		case "name":
			m.Name = *s.name
		case "notify-url":
			m.NotifyURL = *s.notifyURL
		case "success-url":
			m.SuccessURL = *s.successURL
		case "failure-url":
			m.FailureURL = *s.failureURL
		case "allowed-origins":
			m.AllowedOrigins = nil
			for _, o := range splitList(*s.origins) {
				n, e := merchant.NormalizeOrigin(o)
				if e != nil {
					err = e
					return
				}
				m.AllowedOrigins = append(m.AllowedOrigins, n)
			}
		case "methods":
			m.Methods = nil
			for _, p := range splitList(*s.methods) {
				n, e := strconv.Atoi(p)
				if e != nil {
					err = fmt.Errorf("--methods: %q is not a number", p)
					return
				}
				m.Methods = append(m.Methods, n)
			}
		case "min-amount":
			m.Limits.MinAmount, err = decimalFlag(f.Name, *s.minAmount)
		case "max-amount":
			m.Limits.MaxAmount, err = decimalFlag(f.Name, *s.maxAmount)
		case "daily-amount":
			m.Limits.DailyAmount, err = decimalFlag(f.Name, *s.dailyAmount)
		case "monthly-amount":
			m.Limits.MonthlyAmount, err = decimalFlag(f.Name, *s.monthlyAmount)
		case "currencies":
			m.Limits.Currencies = splitList(*s.currs)
		case "countries":
			m.Limits.Countries = splitList(*s.ctrys)
		case "daily-count":
			m.Limits.DailyCount = *s.dailyCount
		case "monthly-count":
			m.Limits.MonthlyCount = *s.monthlyCount
		case "rate-limit":
			m.RateLimitPerMinute = *s.rateLimit
		case "notification-format":
			m.NotificationFormat = *s.format
		}
	})
	return err
}

// decimalFlag parses a limit; an empty value removes the limit.
func decimalFlag(name, v string) (*decimal.Decimal, error) {
	if v == "" {
		return nil, nil
	}
	d, err := decimal.NewFromString(v)
	if err != nil {
		return nil, fmt.Errorf("--%s: %q is not a decimal number", name, v)
	}
	return &d, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}
