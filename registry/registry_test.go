package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// docs is a Documents from a map.
type docs map[string]string

func (d docs) Document(t string) ([]byte, bool) {
	s, ok := d[t]
	return []byte(s), ok
}

// fakeRegistry answers registrations with answer (status, body) and
// counts them by subject; gate, when set, holds each answer until closed.
type fakeRegistry struct {
	mu       sync.Mutex
	calls    map[string]int
	bodies   []schemaRequest
	auth     []string
	answer   func(n int) (int, string) // n: the registrations so far, this one included
	gate     chan struct{}
	received atomic.Int32
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.received.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	var body schemaRequest
	_ = json.NewDecoder(r.Body).Decode(&body)
	user, pass, _ := r.BasicAuth()
	f.mu.Lock()
	f.calls[r.URL.Path]++
	n := 0
	for _, c := range f.calls {
		n += c
	}
	f.bodies = append(f.bodies, body)
	f.auth = append(f.auth, user+":"+pass)
	f.mu.Unlock()
	status, out := f.answer(n)
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(out))
}

func (f *fakeRegistry) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[path]
}

func newFake(t *testing.T, answer func(n int) (int, string)) (*fakeRegistry, string) {
	f := &fakeRegistry{calls: map[string]int{}, answer: answer}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL + "/apis/ccompat/v7"
}

func newRegistry(t *testing.T, url string, d Documents) *Registry {
	r, err := New(Config{URL: url, User: "relay", Password: "s3cret", Documents: d, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// TestFramedBytes: the wire format, byte for byte, and back.
func TestFramedBytes(t *testing.T) {
	got := Framed(0x01020304, []byte(`{"a":1}`))
	want := append([]byte{0x00, 0x01, 0x02, 0x03, 0x04}, `{"a":1}`...)
	if !bytes.Equal(got, want) {
		t.Fatalf("Framed = % x, want % x", got, want)
	}
	id, payload, ok := Unframed(got)
	if !ok || id != 0x01020304 || string(payload) != `{"a":1}` {
		t.Errorf("Unframed = %d %q %v", id, payload, ok)
	}
	if _, _, ok := Unframed([]byte(`{"a":1}`)); ok {
		t.Error("Unframed accepted a value without the magic byte")
	}
}

// TestRegistersOncePerSubject: concurrent first uses of a subject make one
// registration and all get its id; another topic is another subject; an
// event type without a contract is left unframed, without a request.
func TestRegistersOncePerSubject(t *testing.T) {
	f, url := newFake(t, func(int) (int, string) { return 200, `{"id":258}` })
	f.gate = make(chan struct{})
	r := newRegistry(t, url, docs{"OrderPlaced": `{"type":"object"}`})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	values := make([][]byte, 32)
	errs := make([]error, len(values))
	for i := range values {
		wg.Go(func() { values[i], errs[i] = r.Frame(ctx, "orders", "OrderPlaced", []byte(`{}`)) })
	}
	for f.received.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the others reach the wait
	close(f.gate)
	wg.Wait()
	want := []byte{0, 0, 0, 1, 2, '{', '}'}
	for i := range values {
		if errs[i] != nil || !bytes.Equal(values[i], want) {
			t.Fatalf("Frame #%d = % x, %v; want % x", i, values[i], errs[i], want)
		}
	}
	if _, err := r.Frame(ctx, "invoices", "OrderPlaced", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Frame(ctx, "orders", "Unknown", []byte(`x`)); err != nil || string(v) != "x" {
		t.Errorf("no contract: %q, %v; want the payload unframed", v, err)
	}
	if f.calls["/apis/ccompat/v7/subjects/orders-OrderPlaced/versions"] != 1 || f.calls["/apis/ccompat/v7/subjects/invoices-OrderPlaced/versions"] != 1 || len(f.calls) != 2 {
		t.Errorf("registrations %v; want one per subject", f.calls)
	}
	b := f.bodies[0]
	if b.SchemaType != "JSON" || b.Schema != `{"type":"object"}` || f.auth[0] != "relay:s3cret" {
		t.Errorf("registered %+v with auth %q", b, f.auth[0])
	}
}

// TestRegistrationFailures: what each answer makes of a registration, and
// whether the next use asks again.
func TestRegistrationFailures(t *testing.T) {
	for _, tc := range []struct {
		name             string
		status           int
		body             string
		retriable, refus bool
		asked, later     int // after two uses at once; after a third past the first retry's backoff
	}{
		{"unavailable", 503, `{"message":"storage down","error_code":50302}`, true, false, 1, 2},
		{"internal error", 500, `oops`, true, false, 1, 2},
		{"incompatible", 409, `{"message":"Incompatible artifact: orders-OrderPlaced","error_code":409}`, false, true, 1, 1},
		{"invalid", 422, `{"message":"Invalid schema","error_code":42201}`, false, true, 1, 1},
		{"read-only mode", 422, `{"message":"Subject orders-OrderPlaced is in read-only mode","error_code":42205}`, true, false, 1, 2},
		{"unauthorized", 401, `{"message":"Unauthorized","error_code":401}`, false, false, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, url := newFake(t, func(int) (int, string) { return tc.status, tc.body })
			r := newRegistry(t, url, docs{"OrderPlaced": `{"$schema":"x"}`})
			var err error
			for range 2 {
				_, err = r.Frame(context.Background(), "orders", "OrderPlaced", []byte(`{}`))
			}
			var e *Error
			if !errors.As(err, &e) || e.Retriable() != tc.retriable || e.Refused() != tc.refus || e.Status != tc.status {
				t.Fatalf("Frame: %#v; want status %d, retriable %v, refused %v", err, tc.status, tc.retriable, tc.refus)
			}
			const path = "/apis/ccompat/v7/subjects/orders-OrderPlaced/versions"
			if n := f.count(path); n != tc.asked {
				t.Errorf("asked %d times, want %d", n, tc.asked)
			}
			time.Sleep(retryMin + 50*time.Millisecond)
			_, _ = r.Frame(context.Background(), "orders", "OrderPlaced", []byte(`{}`))
			if n := f.count(path); n != tc.later {
				t.Errorf("asked %d times after the backoff, want %d", n, tc.later)
			}
			if tc.refus && e.RegistryMessage() == "" {
				t.Error("a refusal without the registry's message")
			}
		})
	}
}

// TestSlowRegistry: a registration slower than the uses that wait for it
// (the stream cuts each short at its status deadline) is made once, and
// a later use gets its id.
func TestSlowRegistry(t *testing.T) {
	f, url := newFake(t, func(int) (int, string) {
		time.Sleep(200 * time.Millisecond)
		return 200, `{"id":7}`
	})
	r := newRegistry(t, url, docs{"T": `{}`})
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		v, err := r.Frame(ctx, "t", "T", []byte("p"))
		cancel()
		if err == nil {
			if !bytes.Equal(v, []byte{0, 0, 0, 0, 7, 'p'}) {
				t.Fatalf("Frame = % x", v)
			}
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) || time.Now().After(deadline) {
			t.Fatalf("Frame: %v", err)
		}
	}
	if n := f.count("/apis/ccompat/v7/subjects/t-T/versions"); n != 1 {
		t.Errorf("registered %d times, want 1", n)
	}
}

// TestUnreachable: no answer is retriable, and says why.
func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := newRegistry(t, url, docs{"T": `{}`})
	_, err := r.Frame(context.Background(), "t", "T", nil)
	var e *Error
	if !errors.As(err, &e) || !e.Retriable() || e.Status != 0 {
		t.Fatalf("Frame: %v; want a retriable error without a status", err)
	}
}

// TestCredentialsNotInURL: a URL with a password is refused.
func TestCredentialsNotInURL(t *testing.T) {
	if _, err := New(Config{URL: "http://u:p@registry:8081", Documents: docs{}}); err == nil {
		t.Error("New accepted credentials in the URL")
	}
}
