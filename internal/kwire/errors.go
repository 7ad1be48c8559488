package kwire

import (
	"fmt"

	"github.com/segmentio/kafka-go/protocol"
)

// MalformedError is a broker's answer that cannot be decoded safely: a
// length past the bytes the answer has, a frame past MaxFrame, a record
// batch that inflates past its bound. The connection it came on is
// broken: what was in flight on it is lost, as on any disconnection.
type MalformedError struct {
	ApiKey  protocol.ApiKey
	Version int16
	Err     error
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("malformed %s v%d answer from the broker: %v", e.ApiKey, e.Version, e.Err)
}

func (e *MalformedError) Unwrap() error { return e.Err }
