package cfn

import (
	"strings"
	"testing"
)

const sample = `
Parameters:
  Stage:
    Type: String
    Default: sandbox
Conditions:
  IsProd: !Equals [!Ref Stage, production]
  NotProd: !Not [!Condition IsProd]
Globals:
  Function:
    Environment:
      Variables:
        TABLE: !Ref Things
        STAGE: !Ref Stage
Resources:
  Things:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions:
        - {AttributeName: pk, AttributeType: S}
      KeySchema:
        - {AttributeName: pk, KeyType: HASH}
      TimeToLiveSpecification: {AttributeName: ttl, Enabled: true}
  Named:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${AWS::StackName}-named-${Stage}"
      VisibilityTimeout: 60
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt Dead.Arn
        maxReceiveCount: 5
  Dead:
    Type: AWS::SQS::Queue
  Fn:
    Type: AWS::Serverless::Function
    Metadata: {BuildMethod: makefile}
    Properties:
      Environment:
        Variables:
          ARN: !GetAtt Things.Arn
          MODE: !If [IsProd, live, test]
          JOINED: !Join ["-", [a, !Ref Stage, c]]
          LONG: {"Fn::Sub": "${Things}/x"}
          SECRET: !Sub "{{resolve:secretsmanager:${Dead}:SecretString}}"
          NEG: !If [NotProd, yes-sandbox, no]
      Events:
        Get:
          Type: HttpApi
          Properties: {Method: get, Path: "/things/{id}"}
        Q:
          Type: SQS
          Properties: {Queue: !GetAtt Named.Arn}
`

func resolver(t *testing.T, params map[string]string) (*Template, *Resolver) {
	tm, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	return tm, &Resolver{
		T: tm, Params: params,
		Pseudo: map[string]string{"AWS::StackName": "st", "AWS::Region": "r"},
		Ref:    func(id string) (string, error) { return "st-" + id, nil },
		GetAtt: func(id, attr string) (string, error) { return "arn:" + id + ":" + attr, nil },
		Dynamic: func(ref string) (string, error) {
			if !strings.Contains(ref, "st-Dead") {
				t.Errorf("dynamic ref not substituted first: %s", ref)
			}
			return "s3cr3t", nil
		},
	}
}

func TestResolveFunctionsAndSpecs(t *testing.T) {
	tm, r := resolver(t, nil)
	fns, err := tm.Functions()
	if err != nil || len(fns) != 1 {
		t.Fatal(fns, err)
	}
	f := fns[0]
	if f.BuildMethod != "makefile" || len(f.Routes) != 1 || f.Routes[0].Pattern() != "GET /things/{id}" || len(f.Events) != 1 || f.Events[0].Type != "SQS" {
		t.Fatalf("function spec %+v", f)
	}
	env, err := f.ResolveEnv(r)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"TABLE": "st-Things", "STAGE": "sandbox", "ARN": "arn:Things:Arn", "MODE": "test",
		"JOINED": "a-sandbox-c", "LONG": "st-Things/x", "SECRET": "s3cr3t", "NEG": "yes-sandbox"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	_, prod := resolver(t, map[string]string{"Stage": "production"})
	if env, _ := f.ResolveEnv(prod); env["MODE"] != "live" || env["NEG"] != "no" {
		t.Errorf("production env %v", env)
	}

	tables, err := tm.Tables(r)
	if err != nil || len(tables) != 1 || tables[0].Name != "st-Things" || tables[0].TTL != "ttl" || tables[0].Keys[0].Name != "pk" {
		t.Fatalf("tables %+v %v", tables, err)
	}
	queues, err := tm.Queues(r)
	if err != nil || len(queues) != 2 {
		t.Fatal(queues, err)
	}
	if queues[0].LogicalID != "Dead" || queues[1].Name != "st-named-sandbox" || queues[1].DeadLetterQueueID != "Dead" {
		t.Fatalf("queues %+v", queues)
	}
	attrs, err := queues[1].Attributes(r)
	if err != nil {
		t.Fatal(err)
	}
	if rp := attrs["RedrivePolicy"]; !strings.Contains(rp, `"deadLetterTargetArn":"arn:Dead:Arn"`) || !strings.Contains(rp, `"maxReceiveCount":5`) {
		t.Fatalf("redrive policy %s", rp)
	}
	if attrs["VisibilityTimeout"] != "60" {
		t.Fatalf("attributes %v", attrs)
	}
}

func TestUnsupportedIntrinsicIsAnError(t *testing.T) {
	tm, err := Parse([]byte("Resources:\n  F:\n    Type: AWS::Serverless::Function\n    Properties:\n      Environment:\n        Variables:\n          X: !FindInMap [a, b, c]\n"))
	if err != nil {
		t.Fatal(err)
	}
	fns, _ := tm.Functions()
	r := &Resolver{T: tm}
	if _, err := fns[0].ResolveEnv(r); err == nil || !strings.Contains(err.Error(), "FindInMap") {
		t.Fatalf("err = %v", err)
	}
}
