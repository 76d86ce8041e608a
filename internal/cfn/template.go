// Package cfn reads the SAM/CloudFormation template (template.yaml) so the
// local stack can create the very tables, queues and buckets it declares and
// mount the routes it declares. It understands the short-form intrinsic tags
// (!Ref, !Sub, !GetAtt, !Join, !If, !Equals, !Not, !Select) and their long forms.
package cfn

import (
	"fmt"
	"sort"

	"gopkg.in/yaml.v3"
)

// Template is a parsed template.
type Template struct {
	Parameters map[string]Parameter
	Conditions map[string]*yaml.Node
	Globals    *yaml.Node
	Resources  map[string]Resource
}

// Parameter is a template parameter.
type Parameter struct {
	Type          string   `yaml:"Type"`
	Default       string   `yaml:"Default"`
	AllowedValues []string `yaml:"AllowedValues"`
}

// Resource is one entry of Resources.
type Resource struct {
	LogicalID  string
	Type       string
	Condition  string
	Properties *yaml.Node
	Metadata   *yaml.Node
}

// Parse reads a template.
func Parse(b []byte) (*Template, error) {
	var raw struct {
		Parameters map[string]Parameter `yaml:"Parameters"`
		Conditions map[string]yaml.Node `yaml:"Conditions"`
		Globals    yaml.Node            `yaml:"Globals"`
		Resources  map[string]struct {
			Type       string    `yaml:"Type"`
			Condition  string    `yaml:"Condition"`
			Properties yaml.Node `yaml:"Properties"`
			Metadata   yaml.Node `yaml:"Metadata"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	t := &Template{Parameters: raw.Parameters, Conditions: map[string]*yaml.Node{}, Resources: map[string]Resource{}}
	if t.Parameters == nil {
		t.Parameters = map[string]Parameter{}
	}
	for k, v := range raw.Conditions {
		t.Conditions[k] = &v
	}
	if raw.Globals.Kind != 0 {
		t.Globals = &raw.Globals
	}
	for id, r := range raw.Resources {
		res := Resource{LogicalID: id, Type: r.Type, Condition: r.Condition}
		if r.Properties.Kind != 0 {
			res.Properties = &r.Properties
		}
		if r.Metadata.Kind != 0 {
			res.Metadata = &r.Metadata
		}
		t.Resources[id] = res
	}
	return t, nil
}

// OfType returns the resources of a type, sorted by logical id.
func (t *Template) OfType(typ string) []Resource {
	var out []Resource
	for _, r := range t.Resources {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LogicalID < out[j].LogicalID })
	return out
}

// child returns the value node of key in a mapping node.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// Path follows keys through nested mappings.
func Path(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		n = child(n, k)
	}
	return n
}
