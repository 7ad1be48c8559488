package producer

import "errors"

// ErrNoRecords is returned for a batch of no records, which Kafka refuses.
var ErrNoRecords = errors.New("record batch without records")
