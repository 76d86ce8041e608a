package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Invoke calls a function's Lambda handler the way the runtime does: the
// event as JSON bytes, an invocation deadline of the function's Timeout, a
// Lambda context, and the JSON response decoded into out (nil: ignored).
func Invoke(ctx context.Context, h lambda.Handler, functionID string, timeout time.Duration, event, out any) error {
	payload, err := json.Marshal(event)
	if err != nil {
		return fmt.Errorf("encode event for %s: %w", functionID, err)
	}
	return InvokeBytes(ctx, h, functionID, timeout, payload, out)
}

// InvokeBytes is Invoke with an event that is already JSON.
func InvokeBytes(ctx context.Context, h lambda.Handler, functionID string, timeout time.Duration, payload []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       newRequestID(),
		InvokedFunctionArn: fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s-%s", Region, Account, StackName, functionID),
	})
	resp, err := h.Invoke(ctx, payload)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp, out); err != nil {
		return fmt.Errorf("decode response of %s: %w", functionID, err)
	}
	return nil
}

// Timeout is a function's template Timeout (its own, else the Globals',
// else Lambda's default of 3 s).
func (r *Resources) Timeout(id string) time.Duration { return r.functionTimeout(id) }

// RunScheduled invokes a scheduled function of the stack once, as its
// schedule would (EventBridge's event, the function's timeout): a test
// runs a reconciler pass when it wants one.
func (s *Stack) RunScheduled(ctx context.Context, functionID string) error {
	schedules, err := s.Resources.Schedules()
	if err != nil {
		return err
	}
	for _, src := range schedules {
		if src.FunctionID != functionID {
			continue
		}
		h, ok := s.handlers[functionID]
		if !ok {
			return fmt.Errorf("function %s is not running in this stack", functionID)
		}
		return Invoke(ctx, h, functionID, src.Timeout, ScheduledEvent(src.Rule, time.Now()), nil)
	}
	return fmt.Errorf("function %s has no schedule", functionID)
}
