package s3store

// Test hooks for the external test package.

// SetPartSize changes a Writer's part size.
func SetPartSize(w *Writer, n int) { w.partSize = n }

// PartCount is how many parts a Writer uploaded.
func PartCount(w *Writer) int { return len(w.parts) }
