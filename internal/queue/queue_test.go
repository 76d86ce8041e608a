package queue

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func TestDelaySeconds(t *testing.T) {
	for d, want := range map[time.Duration]int32{
		-time.Second: 0, 0: 0, 300 * time.Millisecond: 0, 1999 * time.Millisecond: 1, time.Minute: 60, time.Hour: 900,
	} {
		if got := DelaySeconds(d); got != want {
			t.Errorf("DelaySeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

type fakeSQS struct{ in *sqs.SendMessageInput }

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.in = in
	return &sqs.SendMessageOutput{}, nil
}

func TestSend(t *testing.T) {
	f := &fakeSQS{}
	if err := New(f).Send(context.Background(), "http://q", map[string]int{"a": 1}, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if *f.in.QueueUrl != "http://q" || *f.in.MessageBody != `{"a":1}` || f.in.DelaySeconds != 2 {
		t.Fatalf("%+v", f.in)
	}
	if err := New(f).Send(context.Background(), "http://q", func() {}, 0); err == nil {
		t.Fatal("unencodable body accepted")
	}
}
