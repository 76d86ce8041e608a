package cfn

import (
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Resource types the local stack understands.
const (
	TypeTable    = "AWS::DynamoDB::Table"
	TypeQueue    = "AWS::SQS::Queue"
	TypeBucket   = "AWS::S3::Bucket"
	TypeFunction = "AWS::Serverless::Function"
)

// Key is one key schema element.
type Key struct {
	Name string `yaml:"AttributeName"`
	Type string `yaml:"KeyType"` // HASH | RANGE
}

// Attribute is an attribute definition.
type Attribute struct {
	Name string `yaml:"AttributeName"`
	Type string `yaml:"AttributeType"` // S | N | B
}

// Index is a global secondary index.
type Index struct {
	Name       string `yaml:"IndexName"`
	Keys       []Key  `yaml:"KeySchema"`
	Projection struct {
		Type             string   `yaml:"ProjectionType"`
		NonKeyAttributes []string `yaml:"NonKeyAttributes"`
	} `yaml:"Projection"`
}

// TableSpec is a DynamoDB table of the template.
type TableSpec struct {
	LogicalID  string
	Name       string
	Attributes []Attribute
	Keys       []Key
	Indexes    []Index
	TTL        string // TTL attribute name, if enabled
	// StreamViewType is the table's stream (NEW_AND_OLD_IMAGES, …); "" when
	// it has none.
	StreamViewType string
}

// QueueSpec is an SQS queue of the template.
type QueueSpec struct {
	LogicalID         string
	Name              string
	DeadLetterQueueID string // logical id of the DLQ, if any
	props             map[string]*yaml.Node
}

// Attributes resolves the queue's SQS attributes (VisibilityTimeout,
// RedrivePolicy, ...). Call it once the queues it refers to exist.
func (q QueueSpec) Attributes(r *Resolver) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range q.props {
		rv, err := r.Resolve(v)
		if err != nil {
			return nil, fmt.Errorf("queue %s %s: %w", q.LogicalID, k, err)
		}
		if rv.Kind == yaml.ScalarNode {
			out[k] = rv.Value
			continue
		}
		var m map[string]any
		if err := rv.Decode(&m); err != nil {
			return nil, fmt.Errorf("queue %s %s: %w", q.LogicalID, k, err)
		}
		out[k] = jsonString(m)
	}
	return out, nil
}

// BucketSpec is an S3 bucket of the template.
type BucketSpec struct {
	LogicalID string
	Name      string
}

// Route is an HTTP API route of a function.
type Route struct {
	Method string
	Path   string
}

// Pattern is the net/http ServeMux pattern of the route ("POST /a/{id}").
func (r Route) Pattern() string {
	return r.Method + " " + strings.ReplaceAll(r.Path, "+}", "...}")
}

// Event is a non-HTTP trigger of a function.
type Event struct {
	Name       string
	Type       string // SQS | S3 | Schedule | ...
	Properties *yaml.Node
}

// FunctionSpec is a Lambda function of the template.
type FunctionSpec struct {
	LogicalID   string
	BuildMethod string
	Routes      []Route
	Events      []Event
	// Environment holds Globals merged with the function's own variables,
	// not yet resolved (resolution needs the created resources).
	Environment map[string]*yaml.Node
}

// Names computes local physical names: an explicit name property when the
// template has one, else "<stack>-<LogicalId>" as CloudFormation would.
func (t *Template) physicalName(r *Resolver, res Resource, prop string) (string, error) {
	if n := child(res.Properties, prop); n != nil {
		return r.String(n)
	}
	return r.Pseudo["AWS::StackName"] + "-" + res.LogicalID, nil
}

// Tables lists the tables with resolved names.
func (t *Template) Tables(r *Resolver) ([]TableSpec, error) {
	var out []TableSpec
	for _, res := range t.OfType(TypeTable) {
		name, err := t.physicalName(r, res, "TableName")
		if err != nil {
			return nil, err
		}
		props, err := r.Resolve(res.Properties)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", res.LogicalID, err)
		}
		var p struct {
			Attributes []Attribute `yaml:"AttributeDefinitions"`
			Keys       []Key       `yaml:"KeySchema"`
			Indexes    []Index     `yaml:"GlobalSecondaryIndexes"`
			TTL        struct {
				AttributeName string `yaml:"AttributeName"`
				Enabled       bool   `yaml:"Enabled"`
			} `yaml:"TimeToLiveSpecification"`
			Stream struct {
				ViewType string `yaml:"StreamViewType"`
			} `yaml:"StreamSpecification"`
		}
		if err := props.Decode(&p); err != nil {
			return nil, fmt.Errorf("table %s: %w", res.LogicalID, err)
		}
		spec := TableSpec{LogicalID: res.LogicalID, Name: name, Attributes: p.Attributes, Keys: p.Keys, Indexes: p.Indexes,
			StreamViewType: p.Stream.ViewType}
		if p.TTL.Enabled {
			spec.TTL = p.TTL.AttributeName
		}
		out = append(out, spec)
	}
	return out, nil
}

// Queues lists the queues with resolved names; DLQs come first so a redrive
// policy can point at an existing queue.
func (t *Template) Queues(r *Resolver) ([]QueueSpec, error) {
	var out []QueueSpec
	for _, res := range t.OfType(TypeQueue) {
		name, err := t.physicalName(r, res, "QueueName")
		if err != nil {
			return nil, err
		}
		spec := QueueSpec{LogicalID: res.LogicalID, Name: name, props: map[string]*yaml.Node{}}
		if res.Properties != nil {
			for i := 0; i+1 < len(res.Properties.Content); i += 2 {
				k, v := res.Properties.Content[i].Value, res.Properties.Content[i+1]
				switch k {
				case "QueueName", "Tags", "KmsMasterKeyId", "SqsManagedSseEnabled", "KmsDataKeyReusePeriodSeconds":
					continue
				case "RedrivePolicy":
					if id, _, ok := GetAttTarget(Path(v, "deadLetterTargetArn")); ok {
						spec.DeadLetterQueueID = id
					}
				}
				spec.props[k] = v
			}
		}
		out = append(out, spec)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].DeadLetterQueueID == "" && out[j].DeadLetterQueueID != "" })
	return out, nil
}

// GetAttTarget returns the resource and attribute of a !GetAtt node.
func GetAttTarget(n *yaml.Node) (string, string, bool) {
	fn, arg, ok := intrinsic(n)
	if !ok || fn != "Fn::GetAtt" {
		return "", "", false
	}
	if arg.Kind == yaml.ScalarNode {
		a, b, _ := strings.Cut(arg.Value, ".")
		return a, b, true
	}
	if len(arg.Content) == 2 {
		return arg.Content[0].Value, arg.Content[1].Value, true
	}
	return "", "", false
}

// Buckets lists the buckets with resolved (lower-case) names.
func (t *Template) Buckets(r *Resolver) ([]BucketSpec, error) {
	var out []BucketSpec
	for _, res := range t.OfType(TypeBucket) {
		name, err := t.physicalName(r, res, "BucketName")
		if err != nil {
			return nil, err
		}
		out = append(out, BucketSpec{LogicalID: res.LogicalID, Name: strings.ToLower(name)})
	}
	return out, nil
}

// Functions lists the functions with their routes, events and environment.
func (t *Template) Functions() ([]FunctionSpec, error) {
	var out []FunctionSpec
	globalsEnv := Path(t.Globals, "Function", "Environment", "Variables")
	for _, res := range t.OfType(TypeFunction) {
		f := FunctionSpec{LogicalID: res.LogicalID, Environment: map[string]*yaml.Node{}}
		if n := Path(res.Metadata, "BuildMethod"); n != nil {
			f.BuildMethod = n.Value
		}
		for _, vars := range []*yaml.Node{globalsEnv, Path(res.Properties, "Environment", "Variables")} {
			if vars == nil {
				continue
			}
			for i := 0; i+1 < len(vars.Content); i += 2 {
				f.Environment[vars.Content[i].Value] = vars.Content[i+1]
			}
		}
		events := child(res.Properties, "Events")
		if events != nil {
			for i := 0; i+1 < len(events.Content); i += 2 {
				name, ev := events.Content[i].Value, events.Content[i+1]
				typ := child(ev, "Type")
				if typ == nil {
					return nil, fmt.Errorf("function %s event %s has no Type", res.LogicalID, name)
				}
				props := child(ev, "Properties")
				if typ.Value == "HttpApi" {
					method, path := child(props, "Method"), child(props, "Path")
					if method == nil || path == nil {
						return nil, fmt.Errorf("function %s event %s: HttpApi needs Method and Path", res.LogicalID, name)
					}
					f.Routes = append(f.Routes, Route{Method: strings.ToUpper(method.Value), Path: path.Value})
					continue
				}
				f.Events = append(f.Events, Event{Name: name, Type: typ.Value, Properties: props})
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// ResolveEnv resolves a function's environment variables.
func (f FunctionSpec) ResolveEnv(r *Resolver) (map[string]string, error) {
	env := map[string]string{}
	for k, n := range f.Environment {
		v, err := r.String(n)
		if err != nil {
			return nil, fmt.Errorf("function %s variable %s: %w", f.LogicalID, k, err)
		}
		env[k] = v
	}
	return env, nil
}

// MetricAlarm is what an AWS::CloudWatch::Alarm on one metric watches.
type MetricAlarm struct {
	Namespace          string  `yaml:"Namespace"`
	MetricName         string  `yaml:"MetricName"`
	ComparisonOperator string  `yaml:"ComparisonOperator"`
	Threshold          float64 `yaml:"Threshold"`
	Dimensions         []any   `yaml:"Dimensions"`
}

// Alarm reads the alarm resource name; an error when it is missing or not
// an alarm.
func (t *Template) Alarm(name string) (MetricAlarm, error) {
	res, ok := t.Resources[name]
	if !ok || res.Type != "AWS::CloudWatch::Alarm" {
		return MetricAlarm{}, fmt.Errorf("%s missing or not an AWS::CloudWatch::Alarm", name)
	}
	var a MetricAlarm
	if err := res.Properties.Decode(&a); err != nil {
		return MetricAlarm{}, fmt.Errorf("%s: %w", name, err)
	}
	return a, nil
}
