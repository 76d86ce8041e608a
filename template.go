// Package payreq embeds the SAM template so the local stack and the tests read
// the same tables, queues, buckets and routes that `sam deploy` creates.
package payreq

import _ "embed"

// Template is template.yaml.
//
//go:embed template.yaml
var Template []byte
