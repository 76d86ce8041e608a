package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/payreq/payreq/internal/errkind"
)

// MaxBody is the largest request body accepted (64 KiB).
const MaxBody = 64 << 10

// maxDepth bounds nesting; no body of this API nests more than three levels.
const maxDepth = 32

// JSONTypes are the media types accepted for JSON bodies; the spec's payment
// operations use application/json-patch+json for a plain JSON object.
var JSONTypes = []string{"application/json", "application/json-patch+json"}

// DecodeJSON is the one strict JSON decoder of every endpoint. It reads one
// JSON object into v and refuses, with a 400 problem:
//   - a body that is not valid UTF-8 (encoding/json would turn it into U+FFFD);
//   - a duplicate key in any object (encoding/json lets the last one win, so
//     {"amount":1,"amount":1000} would be read as 1000);
//   - a key that is not exactly a field name of the target (encoding/json
//     matches case-insensitively, so "notifyURL" would set notifyUrl);
//   - unknown fields, trailing data, nesting deeper than 32 levels.
//
// It also checks the media type (415) and the size (413). Its errors are
// errkind errors (Invalid, UnsupportedMedia, TooLarge).
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if err := RequireMediaType(r, "Send the body as application/json.", JSONTypes...); err != nil {
		return err
	}
	body, err := ReadBody(w, r, MaxBody)
	if err != nil {
		return err
	}
	return Unmarshal(body, v)
}

// DecodeOptionalJSON is DecodeJSON for operations whose parameters are all
// optional: a body that is empty or only whitespace reads as {} whatever its
// Content-Type (many HTTP clients send application/json on every POST), so
// v keeps its zero value. A non-empty body follows DecodeJSON's rules.
func DecodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := ReadBody(w, r, MaxBody)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := RequireMediaType(r, "Send the body as application/json.", JSONTypes...); err != nil {
		return err
	}
	return Unmarshal(body, v)
}

// Unmarshal applies DecodeJSON's rules to a body already read.
func Unmarshal(body []byte, v any) error {
	if !utf8.Valid(body) {
		return errkind.BadInput("The body is not valid UTF-8.", "")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return errkind.BadInput("The request body is empty.", "")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := walk(dec, reflect.TypeOf(v), "", 0); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errkind.BadInput("The body must contain exactly one JSON object.", "")
	}
	dec = json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber() // numbers in untyped values stay exact
	if err := dec.Decode(v); err != nil {
		return decodeProblem(err)
	}
	return nil
}

// walk reads one JSON value from dec, checking keys against t (the Go type
// the value decodes into; nil when unknown or custom-decoded).
func walk(dec *json.Decoder, t reflect.Type, path string, depth int) error {
	if depth > maxDepth {
		return errkind.BadInput("The body is nested too deeply.", "")
	}
	tok, err := dec.Token()
	if err != nil {
		return decodeProblem(err)
	}
	t = target(t)
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = fieldsOf(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return decodeProblem(err)
			}
			key := kt.(string)
			name := joinPath(path, key)
			if seen[key] {
				return errkind.Validation([]errkind.FieldError{{Field: name, Detail: "duplicate key " + name}})
			}
			seen[key] = true
			ft := elem
			if fields != nil {
				var ok bool
				if ft, ok = fields[key]; !ok {
					return errkind.Validation([]errkind.FieldError{{Field: name, Detail: "unknown field " + name +
						" (field names are case-sensitive)"}})
				}
			}
			if err := walk(dec, ft, name, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// target dereferences pointers and returns nil for types whose JSON form is
// not checked here (interfaces, custom unmarshalers such as json.RawMessage).
func target(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) {
			return nil
		}
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType) ||
		reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil
	}
	return t
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf lists the exact JSON names of a struct's fields, with the fields
// of embedded structs promoted as encoding/json does.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range fieldsOf(ft) {
					if _, dup := out[k]; !dup {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	fieldCache.Store(t, out)
	return out
}

func decodeProblem(err error) *errkind.Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return errkind.BadInput(fmt.Sprintf("The body is not valid JSON (offset %d).", syn.Offset), "")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errkind.BadInput("The body must be a JSON object.", "")
		}
		return errkind.Validation([]errkind.FieldError{{Field: typ.Field, Detail: typ.Field + " must be a " + jsonKind(typ.Type.Kind().String())}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return errkind.Validation([]errkind.FieldError{{Field: f, Detail: "unknown field " + f}})
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errkind.BadInput("The body is not valid JSON (it ends too early).", "")
	}
	return errkind.BadInput("The body is not valid JSON.", "")
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

// TooLarge is the error of a body over limit bytes: the one place the
// edge decides on a body's size.
func TooLarge(limit int64) *errkind.Error {
	return errkind.New(errkind.TooLarge, "The request body exceeds "+strconv.FormatInt(limit, 10)+" bytes.", "")
}

// ReadBody reads r's body, at most limit bytes (TooLarge beyond).
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, TooLarge(limit)
	}
	if err != nil {
		return nil, errkind.BadInput("The request body could not be read.", "")
	}
	return body, nil
}

// RequireMediaType refuses (UnsupportedMedia, with detail) a request whose
// Content-Type is none of types: the one place the edge decides on a
// body's media type.
func RequireMediaType(r *http.Request, detail string, types ...string) error {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); ct == "" || err != nil || !contains(types, mt) {
		return UnsupportedMedia(detail)
	}
	return nil
}

// UnsupportedMedia is the error of a body in a media type the route does
// not take.
func UnsupportedMedia(detail string) *errkind.Error {
	return errkind.New(errkind.UnsupportedMedia, detail, "")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
