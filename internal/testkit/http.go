package testkit

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Get returns the status code and body of an HTTP GET; a request that
// gets no answer fails the test.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Metrics is a scrape: each sample's name with its labels as written
// (`name{a="b"}`) maps to its value.
type Metrics map[string]float64

// Scrape reads /metrics at addr (host:port) and returns its samples and
// the body as served.
func Scrape(t testing.TB, addr string) (Metrics, string) {
	t.Helper()
	code, body := Get(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	m := Metrics{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m, body
}
