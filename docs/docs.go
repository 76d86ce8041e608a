// Package docs embeds the API description so the local stack can serve it
// and tests can validate responses against it.
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
