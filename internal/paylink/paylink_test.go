package paylink

import (
	"strconv"
	"strings"
	"testing"
)

func TestSlugRoundTripAndForgery(t *testing.T) {
	s, err := New(strings.Repeat("k", 40))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New(strings.Repeat("x", 40))
	const id = int64(1734567890123456789)
	slug := s.Slug(id)
	if len(slug) != SlugLen || strings.Contains(slug, strconv.FormatInt(id, 10)) {
		t.Fatalf("slug %q", slug)
	}
	if got, err := s.Open(slug); err != nil || got != id {
		t.Fatalf("open: %d %v", got, err)
	}
	flipped := []byte(slug)
	flipped[SlugLen-1] ^= 1
	for _, bad := range []string{"", strconv.FormatInt(id, 10), other.Slug(id), string(flipped), slug + "A", slug[:SlugLen-1] + "!"} {
		if _, err := s.Open(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
