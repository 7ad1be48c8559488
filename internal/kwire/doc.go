// Package kwire guards the relay against a broker's malformed answer.
// kafka-go's protocol decoder sizes its allocations from the length
// prefixes of an answer without checking them against the answer's size:
// an array count of 0x7fffffff asks for tens of gigabytes (a fatal
// out-of-memory that recover cannot catch), a negative length panics in
// the decoder's own goroutine. Guard wraps a broker connection so that
// every answer is read whole (its size bounded by MaxFrame) and checked
// against the shape of the response kafka-go will decode it into before
// kafka-go sees a byte of it: a malformed answer breaks that connection,
// never the process.
package kwire
