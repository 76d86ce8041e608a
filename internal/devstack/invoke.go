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
