//go:build !linux

package replication

import (
	"errors"
	"syscall"
)

// lowWaterSupported: pauses sleep here.
const lowWaterSupported = false

func setLowWater(syscall.RawConn, int) error { return errors.New("no SO_RCVLOWAT") }

func readNow(syscall.RawConn, []byte) (int, error) { return 0, errors.New("no raw reads") }
