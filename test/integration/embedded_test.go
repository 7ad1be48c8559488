package integration

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// TestOrdersWithRelayInProcess runs examples/orders with --relay: the
// service writes its events and relays them itself. Its events arrive (the
// rolled-back payment's never does), its own /readyz reports the relay
// ready, and on SIGTERM the relay drains and the service exits 0.
func TestOrdersWithRelayInProcess(t *testing.T) {
	o := newOutbox(t, "orders", defaultColumns)
	root, err := testkit.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "orders-demo")
	build := exec.Command("go", "build", "-race", "-o", bin, "./examples/orders/cmd/orders-demo")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build orders-demo: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--relay", "--postgres-url", pg.URL, "--outbox-table", "public."+o.name)
	cmd.Env = append(os.Environ(),
		"OUTBOX_CDC_KAFKA_BROKERS="+broker.Brokers, "OUTBOX_CDC_SLOT="+o.name, "OUTBOX_CDC_PUBLICATION="+o.name,
		"OUTBOX_CDC_TOPIC="+o.name+".{aggregate_type}", "OUTBOX_CDC_MESSAGE_PREFIX=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64) // the demo prints a handful
	go func() {                    // ends when the process does
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("orders-demo stderr:\n%s", testkit.Tail(stderr.String(), 30))
		}
	})

	var out []string
	addr := ""
	deadline := time.After(90 * time.Second)
	for running := false; !running; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("orders-demo ended early: %v\n%s", <-exited, strings.Join(out, "\n"))
			}
			out = append(out, l)
			if a, ok := strings.CutPrefix(l, "service http on "); ok {
				addr = a
			}
			running = strings.HasPrefix(l, "relay running in-process")
		case <-deadline:
			t.Fatalf("orders-demo not running after 90s:\n%s", strings.Join(out, "\n"))
		}
	}
	msgs := consume(t, []string{o.name + ".order"}, 3, time.Minute)
	types := map[string]int{}
	for _, m := range msgs {
		ty, _ := testkit.Header(m, "event_type")
		types[ty]++
	}
	if types["OrderCreated"] != 2 || types["OrderPaid"] != 1 {
		t.Errorf("events by type %v, want two OrderCreated and one OrderPaid (the declined payment's rolled back)", types)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the service's /readyz = %d while its relay streams, want 200", resp.StatusCode)
	}
	end := o.CurrentLSN(t)
	waitConfirmed(t, o, end, 30*time.Second)

	began := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("orders-demo exited with %v on SIGTERM, want 0\n%s", err, testkit.Tail(stderr.String(), 20))
		}
	case <-time.After(45 * time.Second):
		t.Fatal("orders-demo did not exit within 45s of SIGTERM")
	}
	for l := range lines {
		out = append(out, l)
	}
	if last := out[len(out)-1]; !strings.HasPrefix(last, "relay stopped") {
		t.Errorf("orders-demo's last line %q, want the relay's stop", last)
	}
	t.Logf("service with its relay in-process: 3 events relayed, stopped together in %s", time.Since(began).Round(time.Millisecond))
}
