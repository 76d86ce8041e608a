package ids

import "context"

type seedKey struct{}

// WithSeed returns ctx carrying seed: the secret nonce of the request's
// Idempotency-Key record, from which the handlers derive the ids of what
// the request creates.
func WithSeed(ctx context.Context, seed []byte) context.Context {
	return context.WithValue(ctx, seedKey{}, seed)
}

// SeedFrom returns the seed of ctx, or nil when the request has no
// Idempotency-Key.
func SeedFrom(ctx context.Context) []byte {
	s, _ := ctx.Value(seedKey{}).([]byte)
	return s
}
