package devstack

import (
	"encoding/json"
	"fmt"
	"strings"
)

// EventPattern is one filter of an event source mapping's FilterCriteria,
// as Lambda's event filtering reads it: a JSON object whose keys follow the
// event record's fields and whose leaves are arrays of what a field may be
// (a value, or {"prefix": …}, {"exists": …}, {"anything-but": …}). A record
// is kept when it matches at least one filter of the source.
//
// The subset here is the one the template uses, with the other comparison
// operators refused when the template is read, so that a filter the local
// stack cannot apply never passes silently.
type EventPattern struct {
	root map[string]any
}

// ParseEventPattern reads a FilterCriteria pattern.
func ParseEventPattern(s string) (EventPattern, error) {
	var root map[string]any
	if err := json.Unmarshal([]byte(s), &root); err != nil {
		return EventPattern{}, fmt.Errorf("filter pattern %q: %w", s, err)
	}
	if err := checkPattern(root); err != nil {
		return EventPattern{}, fmt.Errorf("filter pattern %q: %w", s, err)
	}
	return EventPattern{root: root}, nil
}

func checkPattern(p map[string]any) error {
	for k, v := range p {
		switch v := v.(type) {
		case map[string]any:
			if err := checkPattern(v); err != nil {
				return err
			}
		case []any:
			for _, c := range v {
				if m, ok := c.(map[string]any); ok {
					for op := range m {
						if op != "prefix" && op != "exists" && op != "anything-but" {
							return fmt.Errorf("operator %q is not supported locally", op)
						}
					}
				}
			}
		default:
			return fmt.Errorf("field %s: want an object or an array", k)
		}
	}
	return nil
}

// Match reports whether the record (its JSON as the function receives it)
// matches the pattern.
func (p EventPattern) Match(record []byte) bool {
	var doc map[string]any
	if json.Unmarshal(record, &doc) != nil {
		return false
	}
	return matchObject(p.root, doc)
}

func matchObject(pattern, doc map[string]any) bool {
	for k, want := range pattern {
		got, present := doc[k]
		switch want := want.(type) {
		case map[string]any:
			sub, ok := got.(map[string]any)
			if !ok || !matchObject(want, sub) {
				return false
			}
		case []any:
			if !matchLeaf(want, got, present) {
				return false
			}
		}
	}
	return true
}

func matchLeaf(allowed []any, got any, present bool) bool {
	for _, a := range allowed {
		switch a := a.(type) {
		case map[string]any:
			if v, ok := a["exists"].(bool); ok && v == present {
				return true
			}
			if v, ok := a["prefix"].(string); ok && present {
				if s, ok := got.(string); ok && strings.HasPrefix(s, v) {
					return true
				}
			}
			if v, ok := a["anything-but"]; ok && present {
				excluded := false
				for _, x := range asList(v) {
					excluded = excluded || x == got
				}
				if !excluded {
					return true
				}
			}
		default:
			if present && a == got {
				return true
			}
		}
	}
	return false
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}
