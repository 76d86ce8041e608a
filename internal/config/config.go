// Package config reads a function's settings from its environment once, at
// start-up. The names are those template.yaml sets.
package config

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Getenv looks up a variable; os.Getenv in Lambda, a map in tests.
type Getenv func(string) string

// Config is what every function needs.
type Config struct {
	Stage         string // sandbox | production
	LogLevel      slog.Level
	PublicBaseURL string // empty: derive from the request host
	Tables        Tables
	// SealKey is the key itself, set only on the local stack; on AWS it is
	// empty and SealKeySecretARN names the secret to read at cold start.
	SealKey          string
	SealKeySecretARN string
	// Local is true in the local stack (paydev): loopback URLs are allowed.
	Local bool
}

// Tables are the DynamoDB table names. The fields are those of
// dynamo.Tables, so the wiring converts with dynamo.Tables(cfg.Tables):
// configuration imports no adapter.
type Tables struct {
	Merchants       string
	PaymentRequests string
	Operations      string
	Transactions    string
}

// Sandbox reports whether outcomes are simulated.
func (c Config) Sandbox() bool { return c.Stage != "production" }

// Load reads and checks the environment.
func Load(getenv Getenv) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		Stage:         getenv("STAGE"),
		PublicBaseURL: strings.TrimRight(getenv("PUBLIC_BASE_URL"), "/"),
		Tables: Tables{
			Merchants:       getenv("MERCHANTS_TABLE"),
			PaymentRequests: getenv("PAYMENT_REQUESTS_TABLE"),
			Operations:      getenv("OPERATIONS_TABLE"),
			// Checked by the functions that use it (payments, callbacks, ...).
			Transactions: getenv("TRANSACTIONS_TABLE"),
		},
		SealKey:          getenv("SEAL_KEY"),
		SealKeySecretARN: getenv("SEAL_KEY_SECRET_ARN"),
		Local:            getenv("PAYREQ_LOCAL") == "1",
	}
	var missing []string
	for name, v := range map[string]string{"STAGE": c.Stage, "MERCHANTS_TABLE": c.Tables.Merchants,
		"PAYMENT_REQUESTS_TABLE": c.Tables.PaymentRequests, "OPERATIONS_TABLE": c.Tables.Operations,
		"SEAL_KEY_SECRET_ARN or SEAL_KEY": c.SealKeySecretARN + c.SealKey} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("missing environment variables: %s", strings.Join(missing, ", "))
	}
	if c.Stage != "sandbox" && c.Stage != "production" {
		return Config{}, fmt.Errorf("STAGE must be sandbox or production, got %q", c.Stage)
	}
	if err := c.LogLevel.UnmarshalText([]byte(strings.ToUpper(defaultString(getenv("LOG_LEVEL"), "INFO")))); err != nil {
		return Config{}, fmt.Errorf("LOG_LEVEL: %w", err)
	}
	return c, nil
}

// NewLogger returns the JSON logger every function uses.
func (c Config) NewLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: c.LogLevel})).With("stage", c.Stage)
}

func defaultString(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
