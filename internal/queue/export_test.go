package queue

// Waiting is how many sends to queueURL wait for an in-flight slot.
func (c *Coalescer) Waiting(queueURL string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[queueURL]; q != nil {
		return len(q.waiting)
	}
	return 0
}
