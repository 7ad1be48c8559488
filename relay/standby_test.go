package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// TestStandbyConfirmsNothing: an instance standing by for another that
// streams the slot never streamed, so it has confirmed nothing and says
// nothing of the kind; the instance that streamed logs its final position.
func TestStandbyConfirmsNothing(t *testing.T) {
	needServers(t)
	ctx := context.Background()
	name := fmt.Sprintf("standbylog_%d", time.Now().UnixNano()%1e9)
	if err := testkit.CreateTable(ctx, pgURL, name, testkit.DefaultColumns); err != nil {
		t.Fatal(err)
	}
	var firstLogs, secondLogs syncBuffer
	first := start(t, testConfig(name, kafkaBrokers), relay.WithLogger(slog.New(slog.NewJSONHandler(&firstLogs, nil))))

	second, err := relay.New(testConfig(name, kafkaBrokers), relay.WithLogger(slog.New(slog.NewJSONHandler(&secondLogs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	secondCtx, stopSecond := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- second.Run(secondCtx) }()
	// "standing by" follows the first refused session's close, where the
	// standby used to log "confirmed".
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(secondLogs.String(), `"msg":"standing by`) {
		if time.Now().After(deadline) {
			t.Fatalf("the second instance did not stand by within a minute:\n%s", secondLogs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopSecond()
	if err := <-stopped; err != nil {
		t.Errorf("the standby's Run = %v, want nil", err)
	}
	if strings.Contains(secondLogs.String(), `"msg":"confirmed"`) {
		t.Errorf("the standby, which never streamed, logged a confirmation:\n%s", secondLogs.String())
	}

	first.stop()
	if err := <-first.stopped; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	first.stopped <- nil // for the cleanup
	if !strings.Contains(firstLogs.String(), `"msg":"confirmed"`) {
		t.Errorf("the instance that streamed did not log its final position:\n%s", firstLogs.String())
	}
}
