package apispec_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Names code generators give their own client types; a schema of that name
// collides with them (oapi-codegen: "Client redeclared").
var generatedNames = []string{"Client", "ClientInterface", "ClientOption", "ClientWithResponses",
	"ClientWithResponsesInterface", "HttpRequestDoer", "RequestEditorFn", "Configuration", "ApiClient"}

// TestSpecUsesPortableSchemaForms keeps docs/openapi.yaml to the schema
// forms every major generator follows (internal/testing/clientgen runs two
// of them): no type arrays (nullable is oneOf with {type: 'null'}), no null
// inside an enum, no schema named like a generated client type, every
// amount (type number) with a format, and no component schema referenced
// only from webhooks (oapi-codegen prunes those: docs/openapi.md).
func TestSpecUsesPortableSchemaForms(t *testing.T) {
	b, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s/%d", path, i))
			}
		case yaml.MappingNode:
			if strings.Contains(path, "/example") {
				return // examples are data, not schemas
			}
			fields := map[string]*yaml.Node{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				fields[n.Content[i].Value] = n.Content[i+1]
			}
			if ty := fields["type"]; ty != nil && ty.Kind == yaml.SequenceNode {
				t.Errorf("%s: type array %v; use oneOf", path, values(ty))
			}
			if en := fields["enum"]; en != nil && en.Kind == yaml.SequenceNode {
				for _, v := range en.Content {
					if v.Tag == "!!null" {
						t.Errorf("%s: null inside an enum; use oneOf with {type: 'null'}", path)
					}
				}
			}
			if ty := fields["type"]; ty != nil && ty.Value == "number" && fields["format"] == nil {
				t.Errorf("%s: type number without a format (generators pick float32 or float64 by it)", path)
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], path+"/"+n.Content[i].Value)
			}
		}
	}
	walk(&doc, "#")

	var spec struct {
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
		Webhooks map[string]any `yaml:"webhooks"`
	}
	if err := yaml.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	for _, name := range generatedNames {
		if _, ok := spec.Components.Schemas[name]; ok {
			t.Errorf("schema %s collides with the type generators create for the API client", name)
		}
	}
	// References from outside the webhooks (a schema may reference another).
	rest := string(b)
	if i := strings.Index(rest, "\nwebhooks:"); i >= 0 {
		rest = rest[:i]
	}
	for name := range spec.Components.Schemas {
		if !strings.Contains(rest, "'#/components/schemas/"+name+"'") {
			t.Errorf("schema %s is referenced only from webhooks (or not at all); generators that prune unused schemas drop it", name)
		}
	}
}

func values(n *yaml.Node) []string {
	var out []string
	for _, c := range n.Content {
		out = append(out, c.Value)
	}
	return out
}
