package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/problem"
)

type inner struct {
	Name string `json:"name"`
}

type embedded struct {
	City string `json:"city"`
}

type body struct {
	embedded
	Amount    json.RawMessage `json:"amount"`
	NotifyURL string          `json:"notifyUrl"`
	Client    *inner          `json:"client"`
	List      []inner         `json:"list"`
	Any       any             `json:"any"`
}

func TestUnmarshalStrict(t *testing.T) {
	for _, c := range []struct {
		name, body string
		field      string // "" : accepted; "-": refused without a field
	}{
		{"plain", `{"amount":1,"notifyUrl":"https://a.example","city":"Oslo","client":{"name":"A"},"list":[{"name":"B"}],"any":{"x":1}}`, ""},
		{"duplicate top-level key", `{"amount":1,"amount":1000}`, "amount"},
		{"duplicate in raw value", `{"amount":{"a":1,"a":2}}`, "amount.a"},
		{"duplicate in nested object", `{"client":{"name":"A","name":"B"}}`, "client.name"},
		{"duplicate in array element", `{"list":[{"name":"A"},{"name":"A","name":"B"}]}`, "list[1].name"},
		{"duplicate in untyped value", `{"any":{"k":1,"k":2}}`, "any.k"},
		{"case variant", `{"notifyURL":"https://evil.example"}`, "notifyURL"},
		{"case variant of embedded field", `{"City":"Oslo"}`, "City"},
		{"case variant nested", `{"client":{"Name":"A"}}`, "client.Name"},
		{"unknown", `{"nope":1}`, "nope"},
		{"invalid UTF-8", "{\"notifyUrl\":\"\xff\"}", "-"},
		{"trailing data", `{"amount":1} {}`, "-"},
		{"not an object", `[1]`, "-"},
		{"empty", ``, "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v body
			err := httpapi.Unmarshal([]byte(c.body), &v)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			p := problem.From(err)
			if p.Status != 400 {
				t.Fatalf("want a 400 problem, got %v", err)
			}
			if c.field != "-" && (len(p.Errors) != 1 || p.Errors[0].Field != c.field) {
				t.Fatalf("want field %q, got %+v", c.field, p.Errors)
			}
		})
	}
}
