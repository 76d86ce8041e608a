package connector_test

import (
	"context"
	"errors"
	"testing"

	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/provider"
)

func TestSet(t *testing.T) {
	a, b := connector.Missing("x"), connector.Missing("y") // any providers
	if _, err := connector.New("c", map[string]provider.Provider{"a": a}); err == nil {
		t.Fatal("a default that is not configured was accepted")
	}
	if _, err := connector.New("A", map[string]provider.Provider{"A": a}); err == nil {
		t.Fatal("an invalid name was accepted")
	}
	s, err := connector.New("b", map[string]provider.Provider{"a": a, "b": b})
	if err != nil {
		t.Fatal(err)
	}
	if s.Default() != "b" || !s.Has("a") || s.Has("c") || len(s.Names()) != 2 {
		t.Fatalf("set: %+v", s)
	}
	if s.Recorded("") != "b" || s.Recorded("a") != "a" || s.WithLegacy("a").Recorded("") != "a" {
		t.Fatal("recorded names")
	}
	p, ok := s.Get("c")
	if ok {
		t.Fatal("an unconfigured connector was found")
	}
	// A missing connector never says "never charged": that would close an
	// attempt its acquirer may have charged.
	if _, err := p.Lookup(context.Background(), "ref"); !errors.Is(err, connector.ErrNotConfigured) || errors.Is(err, provider.ErrUnknownReference) {
		t.Fatalf("lookup at a missing connector: %v", err)
	}
}
