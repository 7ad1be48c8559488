package backfill

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// TestReadUntilFailure: a publish failure ends a read that waits on the
// server for its next row, at once and without an error of its own; the
// relay's own end and the read's own errors pass through. The reads block
// in synctest bubbles, so a read the failure does not end is a deadlock
// the bubble reports, not a timeout.
func TestReadUntilFailure(t *testing.T) {
	errRead := errors.New("read failed")
	tests := []struct {
		name string
		// act ends the relay's context or the failure's, or neither, while
		// the read waits.
		act       func(stopRelay context.CancelFunc, fail context.CancelCauseFunc)
		failFirst bool  // the failure ended before the read began
		readErr   error // what the read returns when it does not wait
		want      error
	}{
		{name: "failure ends a waiting read", act: func(_ context.CancelFunc, fail context.CancelCauseFunc) { fail(errors.New("refused")) }},
		{name: "failure before the read", failFirst: true},
		{name: "relay stops", act: func(stop context.CancelFunc, _ context.CancelCauseFunc) { stop() }, want: context.Canceled},
		{name: "read error passes", readErr: errRead, want: errRead},
		{name: "read done", readErr: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, stopRelay := context.WithCancel(context.Background())
				defer stopRelay()
				failure, fail := context.WithCancelCause(context.Background())
				defer fail(nil)
				if tt.failFirst {
					fail(errors.New("refused"))
				}
				waits := tt.act != nil || tt.failFirst
				if tt.act != nil {
					go func() {
						synctest.Wait() // the read is waiting
						tt.act(stopRelay, fail)
					}()
				}
				got := readUntilFailure(ctx, failure, func(readCtx context.Context) error {
					if !waits {
						return tt.readErr
					}
					<-readCtx.Done() // the server's next row never comes
					return readCtx.Err()
				})
				if !errors.Is(got, tt.want) || (tt.want == nil && got != nil) {
					t.Errorf("readUntilFailure = %v, want %v", got, tt.want)
				}
			})
		})
	}
}
