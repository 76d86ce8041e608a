package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	payreq "github.com/payreq/payreq"
	"github.com/payreq/payreq/docs"
	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/seal"
)

// Options configure a local stack.
type Options struct {
	StateDir string // .paydev: stack.json, seal key, seeded merchant, logs
	Host     string // 127.0.0.1
	APIPort  int    // 3000; 0 = any free port
	Log      io.Writer
	// ScheduleEvery overrides the template's schedule rates (tests); 0 keeps them.
	ScheduleEvery time.Duration
	// Env overrides function environment variables the template declares
	// (tests scale retry schedules); undeclared names are ignored.
	Env map[string]string
	// Params set template parameters (tests shorten the sandbox timings).
	// Stage, PublicBaseUrl, LocalStack and LocalSealKey are the stack's own.
	Params map[string]string
	// Stage is the template's Stage: "" or "sandbox", or "production" (a
	// real acquirer: the Stripe connector against stripe-mock, through the
	// LocalStripe* parameters, or the Adyen connector against Prism,
	// through the LocalAdyen* ones). A production stack seeds a production
	// merchant.
	Stage string
	// SFTPPort is the local SFTP server's port: 0 means DefaultSFTPPort (2222)
	// when APIPort is fixed, any free port when APIPort is 0 (tests).
	SFTPPort int
	// StackName prefixes the stack's tables, queues and buckets ("" =
	// paydev): stacks with different names share the emulators but no
	// resource (the crash tests run several at once).
	StackName string
	// Untriggered names functions whose event sources and schedules the
	// stack does not run: a test drives them itself (devstack.PollStream,
	// Invoke), measuring each invocation.
	Untriggered []string
	// Faults puts a FaultProxy in front of DynamoDB: the stack's functions
	// and Store reach DynamoDB through it, and Stack.Faults arms it (lost
	// answers, transaction conflicts; docs/lost-answers.md).
	Faults bool
}

// Info is .paydev/stack.json: everything a tool or a person needs to talk to
// the running stack.
type Info struct {
	APIBase   string            `json:"apiBase"`
	SFTPAddr  string            `json:"sftpAddr"`
	Region    string            `json:"region"`
	Endpoints Endpoints         `json:"endpoints"`
	Merchant  SeedMerchant      `json:"merchant"`
	Dashboard SeedDashboardUser `json:"dashboard"`
	Tables    map[string]string `json:"tables"`
	Queues    map[string]string `json:"queues"`
	Buckets   map[string]string `json:"buckets"`
	PIDs      []int             `json:"pids,omitempty"`
	External  bool              `json:"external"`
	// FaultsURL arms the stack's fault proxy (Options.Faults) over HTTP.
	FaultsURL string `json:"faultsUrl,omitempty"`
	// Mail is the local mailbox: the dashboard's e-mails (invitations),
	// one file each (internal/mail.Dir), instead of Amazon SES.
	Mail string `json:"mail"`
}

// Endpoints are the AWS API endpoints in use.
type Endpoints struct {
	DynamoDB string `json:"dynamodb"`
	SQS      string `json:"sqs"`
	S3       string `json:"s3"`
}

// Stack is a running local stack.
type Stack struct {
	Info      Info
	Resources *Resources
	Store     *dynamo.Store
	emu       *Emulators
	server    *http.Server
	gateway   *Gateway
	stateDir  string

	stopPolling context.CancelFunc
	pollers     sync.WaitGroup
	sftp        *localSFTP
	handlers    map[string]lambda.Handler // by function logical id
	// restoreEnv puts back the endpoint variables this stack pointed at its
	// own emulators: once they are stopped, a later Start in the same
	// process must start its own, not take the dead ones for external.
	restoreEnv func()
	faults     *FaultProxy // Options.Faults
	// envOverrides are Options.Env.
	envOverrides map[string]string
}

// Faults is the stack's fault proxy in front of DynamoDB; nil unless the
// stack was started with Options.Faults.
func (s *Stack) Faults() *FaultProxy { return s.faults }

// validStackName: a CloudFormation stack name that also begins a valid
// bucket name ("<stack>-batch-<account>").
var validStackName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// Start brings the whole service up. When AWS_ENDPOINT_URL is already set
// (LocalStack), no emulator is started and that endpoint is used as is.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.StackName != "" && !validStackName.MatchString(opts.StackName) {
		return nil, fmt.Errorf("stack name %q: want lower-case letters, digits and hyphens, starting with a letter, at most 40 characters (it begins an S3 bucket name)", opts.StackName)
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, err
	}
	s := &Stack{stateDir: opts.StateDir, envOverrides: opts.Env}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	external := os.Getenv("AWS_ENDPOINT_URL")
	perService := Endpoints{DynamoDB: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), SQS: os.Getenv("AWS_ENDPOINT_URL_SQS"),
		S3: os.Getenv("AWS_ENDPOINT_URL_S3")}
	switch {
	case external == "" && perService.DynamoDB != "" && perService.SQS != "" && perService.S3 != "":
		// Emulators already running outside this process (make chaos, the
		// crash tests): they outlive the stack, as DynamoDB outlives Lambda.
		s.Info.External = true
		s.Info.Endpoints = perService
		UseEndpoints(perService)
	case external == "":
		if s.emu, err = startEmulatorsFor(ctx, opts); err != nil {
			return nil, err
		}
		s.Info.Endpoints = Endpoints{DynamoDB: s.emu.DynamoDB, SQS: s.emu.SQS, S3: s.emu.S3}
		s.Info.PIDs = s.emu.PIDs()
		s.restoreEnv = saveEnv(endpointVars...)
		UseEndpoints(s.Info.Endpoints)
	default:
		s.Info.External = true
		s.Info.Endpoints = Endpoints{DynamoDB: external, SQS: external, S3: external}
		// Any region works (samconfig's is eu-west-1); Provision takes it
		// from the SDK configuration.
		if os.Getenv("AWS_DEFAULT_REGION") == "" {
			setDefault("AWS_REGION", Region)
		}
		setDefault("AWS_ACCESS_KEY_ID", "test")
		setDefault("AWS_SECRET_ACCESS_KEY", "test")
	}

	listener, err := net.Listen("tcp", net.JoinHostPort(opts.Host, fmt.Sprint(opts.APIPort)))
	if err != nil {
		return nil, fmt.Errorf("listen on %s:%d (is another stack running?): %w", opts.Host, opts.APIPort, err)
	}
	// Every later failure closes the listener here (Close has no server yet).
	defer func() {
		if err != nil {
			listener.Close()
		}
	}()
	s.Info.APIBase = "http://" + listener.Addr().String()
	if opts.Faults {
		if s.faults, err = StartFaultProxy(s.Info.Endpoints.DynamoDB); err != nil {
			return nil, err
		}
		s.Info.Endpoints.DynamoDB = s.faults.URL
		s.Info.FaultsURL = s.faults.URL + faultsPath
		if s.restoreEnv == nil {
			s.restoreEnv = saveEnv(endpointVars...)
		}
		os.Setenv("AWS_ENDPOINT_URL_DYNAMODB", s.faults.URL)
	}

	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		return nil, err
	}
	// The region the SDK really uses (AWS_REGION of a LocalStack shell).
	s.Info.Region = cfg.Region
	sealKey, err := loadOrCreate(filepath.Join(opts.StateDir, "seal.key"), seal.NewKey)
	if err != nil {
		return nil, err
	}
	if opts.Stage == "" {
		opts.Stage = "sandbox"
	}
	if opts.Stage != "sandbox" && opts.Stage != "production" {
		return nil, fmt.Errorf("stage %q: want sandbox or production", opts.Stage)
	}
	params := LocalParams(payreq.Template, opts.Params, os.Getenv)
	for k, v := range map[string]string{"Stage": opts.Stage, "PublicBaseUrl": s.Info.APIBase, "LocalStack": "1", "LocalSealKey": sealKey,
		"LocalDynamoDBEndpoint": s.Info.Endpoints.DynamoDB, "LocalSQSEndpoint": s.Info.Endpoints.SQS, "LocalS3Endpoint": s.Info.Endpoints.S3} {
		params[k] = v
	}
	if addr := localSFTPAddress(opts); addr != "" {
		params["LocalSftpAddress"] = addr
	}
	if s.Info.Mail, err = filepath.Abs(filepath.Join(opts.StateDir, "mail")); err != nil {
		return nil, err
	}
	params["LocalMailDir"] = s.Info.Mail
	if s.Resources, err = Provision(ctx, cfg, opts.StackName, payreq.Template, params, sealKey); err != nil {
		return nil, err
	}
	s.Info.Tables, s.Info.Queues, s.Info.Buckets = s.Resources.Tables, map[string]string{}, s.Resources.Buckets
	for id, q := range s.Resources.Queues {
		s.Info.Queues[id] = q.URL
	}
	s.Store = dynamo.New(dynamodb.NewFromConfig(cfg), s.Tables())
	sealer, err := seal.New(sealKey)
	if err != nil {
		return nil, err
	}
	if s.Info.Merchant, err = seedMerchant(ctx, s.Store, sealer, filepath.Join(opts.StateDir, "merchant.json"), s.Info.APIBase, opts.Stage == "sandbox"); err != nil {
		return nil, err
	}
	if s.Info.Dashboard, err = seedDashboardUser(ctx, s.Store, filepath.Join(opts.StateDir, "dashboard.json"), s.Info.APIBase, s.Info.Merchant.ID); err != nil {
		return nil, err
	}

	s.handlers = map[string]lambda.Handler{}
	targets := map[string]HTTPTarget{}
	for _, f := range s.Resources.Functions {
		if len(f.Routes) == 0 {
			continue
		}
		h, err := s.build(ctx, f.LogicalID, opts, cfg)
		if err != nil {
			return nil, err
		}
		targets[f.LogicalID] = HTTPTarget{Handler: h, Timeout: s.Resources.functionTimeout(f.LogicalID)}
	}
	sources, err := s.Resources.SQSSources()
	if err != nil {
		return nil, err
	}
	pollCtx, stopPolling := context.WithCancel(context.Background())
	s.stopPolling = stopPolling
	sqsClient := sqs.NewFromConfig(cfg)
	log := slog.New(slog.NewJSONHandler(opts.Log, nil)).With("component", "paydev")
	for _, src := range sources {
		if slices.Contains(opts.Untriggered, src.FunctionID) {
			continue
		}
		h, err := s.build(ctx, src.FunctionID, opts, cfg)
		if err != nil {
			return nil, err
		}
		s.pollers.Add(1)
		go func() { defer s.pollers.Done(); PollSQS(pollCtx, sqsClient, src, h, log) }()
	}
	streams, err := s.Resources.StreamSources()
	if err != nil {
		return nil, err
	}
	// DynamoDB Streams is served at DynamoDB's own endpoint (DynamoDB
	// Local, LocalStack).
	streamsClient := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(s.Info.Endpoints.DynamoDB)
	})
	for _, src := range streams {
		if slices.Contains(opts.Untriggered, src.FunctionID) {
			continue
		}
		h, err := s.build(ctx, src.FunctionID, opts, cfg)
		if err != nil {
			return nil, err
		}
		s.pollers.Add(1)
		go func() { defer s.pollers.Done(); PollStream(pollCtx, streamsClient, sqsClient, src, h, log) }()
	}
	schedules, err := s.Resources.Schedules()
	if err != nil {
		return nil, err
	}
	for _, src := range schedules {
		if slices.Contains(opts.Untriggered, src.FunctionID) {
			continue
		}
		h, err := s.build(ctx, src.FunctionID, opts, cfg)
		if err != nil {
			return nil, err
		}
		every := src.Every
		if opts.ScheduleEvery > 0 {
			every = opts.ScheduleEvery
		}
		s.pollers.Add(1)
		go func() { defer s.pollers.Done(); RunSchedule(pollCtx, src, every, h, log) }()
	}
	if err := s.startSFTP(ctx, opts, cfg, log); err != nil {
		return nil, err
	}
	s.gateway = NewGateway(s.Resources.Functions, targets)
	s.gateway.Handle("GET /health", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	}))
	// Local only: the demo merchant of the integration guide.
	demo := demoMerchant(s.Info.APIBase, s.Info.Merchant.APIKey)
	s.gateway.Handle("GET /demo", demo)
	s.gateway.Handle("GET /demo/assets/{file}", demo)
	s.gateway.Handle("POST /demo/api/checkout", demo)
	// Local only: the API description, for humans and code generators.
	s.gateway.Handle("GET /openapi.yaml", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(docs.OpenAPI)
	}))
	// Local only: the rendered API reference (Redoc, served from here: works offline).
	s.gateway.Handle("GET /docs", docs.ReferenceHandler())
	s.gateway.Handle("GET /docs/{file}", docs.ReferenceHandler())
	s.server = &http.Server{Handler: s.gateway, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.server.Serve(listener) }()

	if err := s.writeEnvFile(opts.Env); err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(s.Info, "", "  ")
	if err := os.WriteFile(filepath.Join(opts.StateDir, "stack.json"), b, 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

// startEmulatorsFor starts the stack's own emulators, logs in its state
// directory.
func startEmulatorsFor(ctx context.Context, opts Options) (*Emulators, error) {
	infra, err := InfraDir()
	if err != nil {
		return nil, err
	}
	if err := EnsureNodeModules(infra, opts.Log); err != nil {
		return nil, err
	}
	return StartEmulators(ctx, infra, filepath.Join(opts.StateDir, "logs"), 0, 0)
}

// build returns a function's Lambda handler, built once per stack (one warm
// Lambda instance per function) from its template environment.
func (s *Stack) build(ctx context.Context, id string, opts Options, cfg aws.Config) (lambda.Handler, error) {
	if h, ok := s.handlers[id]; ok {
		return h, nil
	}
	fn, ok := Functions[id]
	if !ok {
		return nil, fmt.Errorf("function %s is in the template but not in devstack.Functions", id)
	}
	env, err := s.functionEnv(id, opts.Env)
	if err != nil {
		return nil, err
	}
	h, err := fn.Build(ctx, mapEnv(env), &cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	s.handlers[id] = h
	return h, nil
}

// functionEnv is a function's environment as the template resolves it with
// the local stack's parameters. Overrides (tests) replace only variables the
// function's template environment declares: nothing reaches a function from
// outside the template.
func (s *Stack) functionEnv(id string, overrides map[string]string) (map[string]string, error) {
	e, err := s.Resources.Env(id)
	if err != nil {
		return nil, err
	}
	for k, v := range overrides {
		if _, declared := e[k]; declared {
			e[k] = v
		}
	}
	return e, nil
}

// EnvFile is .paydev/env.json: every function's resolved environment in the
// format of `sam local invoke --env-vars` ({"<LogicalId>": {"VAR": "value"}}).
const EnvFile = "env.json"

func (s *Stack) writeEnvFile(overrides map[string]string) error {
	all := map[string]map[string]string{}
	for _, f := range s.Resources.Functions {
		e, err := s.functionEnv(f.LogicalID, overrides)
		if err != nil {
			return err
		}
		all[f.LogicalID] = e
	}
	b, _ := json.MarshalIndent(all, "", "  ")
	// 0600: the local seal key is in it.
	return os.WriteFile(filepath.Join(s.stateDir, EnvFile), append(b, '\n'), 0o600)
}

// FunctionEnv is a function's environment on this stack (env.json's).
func (s *Stack) FunctionEnv(id string) (map[string]string, error) {
	return s.functionEnv(id, s.envOverrides)
}

// Gateway returns the local HTTP API (to mount extra local-only routes).
func (s *Stack) Gateway() *Gateway { return s.gateway }

// Tables names the stack's DynamoDB tables, as the template provisioned them.
func (s *Stack) Tables() dynamo.Tables {
	return dynamo.Tables{Merchants: s.Resources.Tables["MerchantsTable"],
		PaymentRequests: s.Resources.Tables["PaymentRequestsTable"], Operations: s.Resources.Tables["OperationsTable"],
		Transactions: s.Resources.Tables["TransactionsTable"]}
}

// Close stops the server and the emulators and removes stack.json.
func (s *Stack) Close() {
	if s.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.server.Shutdown(ctx)
		cancel()
	}
	if s.sftp != nil {
		s.sftp.close()
	}
	if s.stopPolling != nil {
		s.stopPolling()
		s.pollers.Wait()
	}
	if s.faults != nil {
		s.faults.Close()
	}
	if s.emu != nil {
		s.emu.Stop()
	}
	if s.restoreEnv != nil {
		s.restoreEnv()
		s.restoreEnv = nil
	}
	if s.stateDir != "" {
		_ = os.Remove(filepath.Join(s.stateDir, "stack.json"))
	}
}

// endpointVars are the variables UseEndpoints sets per service.
var endpointVars = []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3"}

// saveEnv returns a function that puts the named variables back as they
// are now (unset if unset).
func saveEnv(names ...string) func() {
	type saved struct {
		v  string
		ok bool
	}
	old := map[string]saved{}
	for _, n := range names {
		v, ok := os.LookupEnv(n)
		old[n] = saved{v, ok}
	}
	return func() {
		for n, sv := range old {
			if sv.ok {
				os.Setenv(n, sv.v)
			} else {
				os.Unsetenv(n)
			}
		}
	}
}

// UseEndpoints points this process's AWS SDK at the given endpoints through
// the SDK's own environment variables, with dummy credentials.
func UseEndpoints(e Endpoints) {
	os.Setenv("AWS_ENDPOINT_URL_DYNAMODB", e.DynamoDB)
	os.Setenv("AWS_ENDPOINT_URL_SQS", e.SQS)
	os.Setenv("AWS_ENDPOINT_URL_S3", e.S3)
	os.Setenv("AWS_REGION", Region)
	setDefault("AWS_ACCESS_KEY_ID", "local")
	setDefault("AWS_SECRET_ACCESS_KEY", "local")
	// Never let a developer's real profile leak into local runs.
	os.Unsetenv("AWS_PROFILE")
	os.Unsetenv("AWS_SESSION_TOKEN")
}

func setDefault(k, v string) {
	if os.Getenv(k) == "" {
		os.Setenv(k, v)
	}
}

func mapEnv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func loadOrCreate(path string, gen func() string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	v := gen()
	return v, os.WriteFile(path, []byte(v+"\n"), 0o600)
}

// ReadInfo loads a running stack's stack.json.
func ReadInfo(stateDir string) (Info, error) {
	var info Info
	b, err := os.ReadFile(filepath.Join(stateDir, "stack.json"))
	if err != nil {
		return info, fmt.Errorf("no running local stack (%w); start one with `make dev`", err)
	}
	return info, json.Unmarshal(b, &info)
}

// SealKey returns the local stack's seal key.
func SealKey(stateDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, "seal.key"))
	return strings.TrimSpace(string(b)), err
}
