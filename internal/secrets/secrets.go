// Package secrets reads secrets from AWS Secrets Manager: one
// GetSecretValue call per secret and process, at cold start, so the values
// never sit in a function's configuration.
package secrets

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Timeout bounds the whole read, retries included: a cold start must not
// hang on Secrets Manager.
const Timeout = 3 * time.Second

var (
	mu    sync.Mutex
	cache = map[string]string{}
)

// String returns the SecretString of the secret with this ARN or name,
// reading it once per process.
func String(ctx context.Context, cfg aws.Config, id string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if v, ok := cache[id]; ok {
		return v, nil
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	out, err := secretsmanager.NewFromConfig(cfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		return "", fmt.Errorf("read secret: %w", err)
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("secret %s has no string value", id)
	}
	cache[id] = *out.SecretString
	return *out.SecretString, nil
}
