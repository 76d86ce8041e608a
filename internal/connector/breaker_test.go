package connector_test

import (
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/connector"
)

// Threshold unprocessed charges in a row open the circuit for the
// cool-down; after it one trial goes through; its failure opens it again,
// an answer closes it. Every change is reported once.
func TestBreakerOpensAfterThresholdAndTriesOnceAfterCooldown(t *testing.T) {
	var changes []string
	b := &connector.Breaker{Threshold: 3, Cooldown: time.Minute, Changed: func(n string, open bool) {
		changes = append(changes, n+map[bool]string{true: " open", false: " closed"}[open])
	}}
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 2; i++ {
		b.NotProcessed("stripe", t0)
	}
	b.Processed("stripe") // an answer in between resets the count
	for i := 0; i < 2; i++ {
		b.NotProcessed("stripe", t0)
	}
	if !b.Allow("stripe", t0) || b.Open("stripe", t0) {
		t.Fatal("open before the threshold")
	}
	b.NotProcessed("stripe", t0)
	if b.Allow("stripe", t0.Add(59*time.Second)) || !b.Open("stripe", t0) || !b.Allow("adyen", t0) {
		t.Fatal("want stripe open for the cool-down, adyen untouched")
	}
	after := t0.Add(time.Minute)
	if !b.Allow("stripe", after) || b.Allow("stripe", after) {
		t.Fatal("after the cool-down: want exactly one trial")
	}
	b.NotProcessed("stripe", after) // the trial failed: open again
	if b.Allow("stripe", after.Add(30*time.Second)) || !b.Allow("stripe", after.Add(time.Minute)) {
		t.Fatal("a failed trial opens the circuit for another cool-down")
	}
	b.Processed("stripe")
	if !b.Allow("stripe", after.Add(time.Minute)) || b.Open("stripe", after) {
		t.Fatal("an answer closes the circuit")
	}
	if got := strings.Join(changes, ","); got != "stripe open,stripe closed" {
		t.Fatalf("changes %q", got)
	}
	var nilBreaker *connector.Breaker
	if !nilBreaker.Allow("x", t0) || nilBreaker.Open("x", t0) {
		t.Fatal("a nil breaker lets everything through")
	}
}
