package cfn

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Resolver evaluates intrinsic functions for one stack.
type Resolver struct {
	T      *Template
	Params map[string]string // parameter overrides; defaults come from the template
	Pseudo map[string]string // AWS::Region, AWS::StackName, AWS::AccountId, ...
	// Ref returns what !Ref of a resource yields (table name, queue URL, ...).
	Ref func(logicalID string) (string, error)
	// GetAtt returns a resource attribute (Arn, QueueName, ...).
	GetAtt func(logicalID, attr string) (string, error)
	// Dynamic resolves "{{resolve:...}}" references (secrets).
	Dynamic func(ref string) (string, error)
}

var dynamicRef = regexp.MustCompile(`\{\{resolve:[^}]*\}\}`)

// Resolve returns a copy of n with every intrinsic replaced by its value.
func (r *Resolver) Resolve(n *yaml.Node) (*yaml.Node, error) {
	if n == nil {
		return nil, nil
	}
	if fn, arg, ok := intrinsic(n); ok {
		v, err := r.call(fn, arg)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
	out := *n
	out.Content = nil
	for _, c := range n.Content {
		rc, err := r.Resolve(c)
		if err != nil {
			return nil, err
		}
		out.Content = append(out.Content, rc)
	}
	if n.Kind == yaml.ScalarNode && dynamicRef.MatchString(n.Value) {
		s, err := r.dynamic(n.Value)
		if err != nil {
			return nil, err
		}
		out.Value = s
	}
	return &out, nil
}

// String resolves n to a string scalar.
func (r *Resolver) String(n *yaml.Node) (string, error) {
	v, err := r.Resolve(n)
	if err != nil || v == nil {
		return "", err
	}
	if v.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("line %d: expected a scalar", n.Line)
	}
	return v.Value, nil
}

// intrinsic recognises !Tag forms and {"Fn::X": ...} / {"Ref": ...} forms.
func intrinsic(n *yaml.Node) (string, *yaml.Node, bool) {
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		name := strings.TrimPrefix(n.Tag, "!")
		arg := *n
		arg.Tag = ""
		switch arg.Kind {
		case yaml.ScalarNode:
			arg.Tag = "!!str"
		case yaml.SequenceNode:
			arg.Tag = "!!seq"
		case yaml.MappingNode:
			arg.Tag = "!!map"
		}
		if name != "Ref" && name != "Condition" {
			name = "Fn::" + name
		}
		return name, &arg, true
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		k := n.Content[0].Value
		if k == "Ref" || strings.HasPrefix(k, "Fn::") || k == "Condition" {
			return k, n.Content[1], true
		}
	}
	return "", nil, false
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func (r *Resolver) call(fn string, arg *yaml.Node) (*yaml.Node, error) {
	switch fn {
	case "Ref":
		s, err := r.ref(arg.Value)
		return scalar(s), err
	case "Fn::GetAtt":
		var res, attr string
		if arg.Kind == yaml.ScalarNode {
			res, attr, _ = strings.Cut(arg.Value, ".")
		} else if len(arg.Content) == 2 {
			res, attr = arg.Content[0].Value, arg.Content[1].Value
		}
		s, err := r.GetAtt(res, attr)
		return scalar(s), err
	case "Fn::Sub":
		return r.sub(arg)
	case "Fn::Join":
		if arg.Kind != yaml.SequenceNode || len(arg.Content) != 2 {
			return nil, fmt.Errorf("line %d: !Join needs [delimiter, [values]]", arg.Line)
		}
		list, err := r.Resolve(arg.Content[1])
		if err != nil {
			return nil, err
		}
		var parts []string
		for _, p := range list.Content {
			parts = append(parts, p.Value)
		}
		return scalar(strings.Join(parts, arg.Content[0].Value)), nil
	case "Fn::Select":
		idx, err := r.String(arg.Content[0])
		if err != nil {
			return nil, err
		}
		list, err := r.Resolve(arg.Content[1])
		if err != nil {
			return nil, err
		}
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= len(list.Content) {
			return nil, fmt.Errorf("line %d: !Select index %q out of range", arg.Line, idx)
		}
		return list.Content[i], nil
	case "Fn::If":
		if arg.Kind != yaml.SequenceNode || len(arg.Content) != 3 {
			return nil, fmt.Errorf("line %d: !If needs [condition, then, else]", arg.Line)
		}
		ok, err := r.Condition(arg.Content[0].Value)
		if err != nil {
			return nil, err
		}
		if ok {
			return r.Resolve(arg.Content[1])
		}
		return r.Resolve(arg.Content[2])
	case "Fn::Equals", "Fn::Not", "Condition", "Fn::And", "Fn::Or":
		b, err := r.boolean(fn, arg)
		return scalar(strconv.FormatBool(b)), err
	}
	return nil, fmt.Errorf("line %d: intrinsic %s is not supported by the local stack", arg.Line, fn)
}

// Condition evaluates a named condition of the template.
func (r *Resolver) Condition(name string) (bool, error) {
	n, ok := r.T.Conditions[name]
	if !ok {
		return false, fmt.Errorf("unknown condition %q", name)
	}
	fn, arg, ok := intrinsic(n)
	if !ok {
		return false, fmt.Errorf("condition %q is not a function", name)
	}
	return r.boolean(fn, arg)
}

func (r *Resolver) boolean(fn string, arg *yaml.Node) (bool, error) {
	switch fn {
	case "Condition":
		return r.Condition(arg.Value)
	case "Fn::Equals":
		if len(arg.Content) != 2 {
			return false, fmt.Errorf("line %d: !Equals needs two values", arg.Line)
		}
		a, err := r.String(arg.Content[0])
		if err != nil {
			return false, err
		}
		b, err := r.String(arg.Content[1])
		return a == b, err
	case "Fn::Not", "Fn::And", "Fn::Or":
		var vals []bool
		for _, c := range arg.Content {
			cfn, carg, ok := intrinsic(c)
			if !ok {
				return false, fmt.Errorf("line %d: %s needs conditions", c.Line, fn)
			}
			v, err := r.boolean(cfn, carg)
			if err != nil {
				return false, err
			}
			vals = append(vals, v)
		}
		switch fn {
		case "Fn::Not":
			return len(vals) == 1 && !vals[0], nil
		case "Fn::And":
			for _, v := range vals {
				if !v {
					return false, nil
				}
			}
			return true, nil
		default:
			for _, v := range vals {
				if v {
					return true, nil
				}
			}
			return false, nil
		}
	}
	v, err := r.call(fn, arg)
	if err != nil {
		return false, err
	}
	return v.Value == "true", nil
}

func (r *Resolver) ref(name string) (string, error) {
	if v, ok := r.Pseudo[name]; ok {
		return v, nil
	}
	if v, ok := r.Params[name]; ok {
		return v, nil
	}
	if p, ok := r.T.Parameters[name]; ok {
		return p.Default, nil
	}
	if _, ok := r.T.Resources[name]; ok {
		return r.Ref(name)
	}
	return "", fmt.Errorf("!Ref %s: no such parameter or resource", name)
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

func (r *Resolver) sub(arg *yaml.Node) (*yaml.Node, error) {
	tmpl := arg.Value
	vars := map[string]string{}
	if arg.Kind == yaml.SequenceNode {
		if len(arg.Content) != 2 {
			return nil, fmt.Errorf("line %d: !Sub needs [string, {vars}]", arg.Line)
		}
		tmpl = arg.Content[0].Value
		m := arg.Content[1]
		for i := 0; i+1 < len(m.Content); i += 2 {
			v, err := r.String(m.Content[i+1])
			if err != nil {
				return nil, err
			}
			vars[m.Content[i].Value] = v
		}
	}
	var firstErr error
	out := subVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := vars[name]; ok {
			return v
		}
		var v string
		var err error
		if res, attr, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
			v, err = r.GetAtt(res, attr)
		} else {
			v, err = r.ref(name)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	})
	if firstErr != nil {
		return nil, firstErr
	}
	if dynamicRef.MatchString(out) {
		s, err := r.dynamic(out)
		if err != nil {
			return nil, err
		}
		out = s
	}
	return scalar(out), nil
}

func (r *Resolver) dynamic(s string) (string, error) {
	var firstErr error
	out := dynamicRef.ReplaceAllStringFunc(s, func(m string) string {
		if r.Dynamic == nil {
			firstErr = fmt.Errorf("dynamic reference %q has no resolver", m)
			return ""
		}
		v, err := r.Dynamic(m)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	})
	return out, firstErr
}
