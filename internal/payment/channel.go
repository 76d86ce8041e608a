package payment

// Channel is where a payment attempt came from, as far as its merchant
// notification is concerned: interactive attempts (the merchant API,
// host-to-host, the hosted page, provider callbacks finishing them) and
// batch-file rows are notified through separate queues, so a large batch
// never delays the notification of a payment someone is waiting for.
type Channel string

// Channels. The zero value is interactive: attempts stored before channels
// existed, and every attempt that does not say otherwise, take the queue a
// person may be waiting on.
const (
	ChannelInteractive Channel = ""
	ChannelBatch       Channel = "batch"
)

// Batch reports whether c is the batch channel.
func (c Channel) Batch() bool { return c == ChannelBatch }

// String is the channel's name in logs and metrics.
func (c Channel) String() string {
	if c == ChannelBatch {
		return "batch"
	}
	return "interactive"
}
