package producer

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain lets the tests that run beside others under -short
// (besideOthersWhenShort) run twice as many at once as go test's default
// (-parallel: GOMAXPROCS), unless -parallel is given. They mostly wait
// out backoffs, sleeps and fake brokers' delays, not the CPU; many were
// sink's tests, run beside producer's in a second process, before the
// engine moved here: one process now runs both, and does as many at once
// as the two did.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() && !flagGiven("test.parallel") {
		if err := flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0))); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(name string) (given bool) {
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
