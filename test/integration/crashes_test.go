package integration

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// killRepeatedly kills r with SIGKILL kills times, at random moments
// 200 ms to 1.5 s apart, starting it again with args each time; the last
// start keeps running.
func killRepeatedly(t *testing.T, r *relay, args []string, kills int) *relay {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := range kills {
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		if err := r.cmd.Process.Kill(); err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		<-r.done
		r = startRelay(t, args...)
	}
	return r
}

// wokenAppendsNothing wakes frozen (SIGCONT) and checks that, within 5 s,
// it appends no record to topic: another instance took its slot over.
func wokenAppendsNothing(t *testing.T, frozen *relay, topic string) {
	t.Helper()
	_, before, err := endOffsets(topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := frozen.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	_, after, err := endOffsets(topic)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the woken instance appended %d records after another took its slot over", after-before)
	}
}
