package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/payreq/payreq/internal/problem"
)

// MaxBody is the largest request body accepted (64 KiB).
const MaxBody = 64 << 10

// JSONTypes are the media types accepted for JSON bodies; the spec's payment
// operations use application/json-patch+json for a plain JSON object.
var JSONTypes = []string{"application/json", "application/json-patch+json"}

// DecodeJSON reads one JSON object into v: checks the media type, limits the
// size, refuses unknown fields and trailing data. Errors are problems.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || !contains(JSONTypes, mt) {
		return problem.UnsupportedMediaType("Send the body as application/json.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return problem.TooLarge(MaxBody)
	}
	if err != nil {
		return problem.BadRequest("The request body could not be read.", "")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeProblem(err)
	}
	if dec.More() {
		return problem.BadRequest("The body must contain exactly one JSON object.", "")
	}
	return nil
}

func decodeProblem(err error) *problem.Problem {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return problem.BadRequest(fmt.Sprintf("The body is not valid JSON (offset %d).", syn.Offset), "")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return problem.BadRequest("The body must be a JSON object.", "")
		}
		return problem.Validation([]problem.FieldError{{Field: typ.Field, Detail: typ.Field + " must be a " + jsonKind(typ.Type.Kind().String())}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return problem.Validation([]problem.FieldError{{Field: f, Detail: "unknown field " + f}})
	case errors.Is(err, io.EOF):
		return problem.BadRequest("The request body is empty.", "")
	}
	return problem.BadRequest("The body is not valid JSON.", "")
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "struct", "map", "ptr":
		return "JSON object"
	case "slice", "array":
		return "JSON array"
	}
	return "number"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
