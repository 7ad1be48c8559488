package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/outbox-cdc/outbox-cdc/internal/tlsfiles"
)

// requestTimeout bounds one request; a registry slower than this is
// treated as down, and the request is made again after a backoff.
const requestTimeout = 10 * time.Second

// contentType is the Confluent API's media type, which every compatible
// registry accepts.
const contentType = "application/vnd.schemaregistry.v1+json"

// client speaks the Confluent schema registry API, the subset this
// package needs: register, test compatibility, list subjects, read a
// schema by id.
type client struct {
	base           string // without a trailing slash
	user, password string // basic auth; empty user: none
	http           *http.Client
}

func newClient(base, user, password string, files *tlsfiles.Files) (*client, error) {
	u, err := url.Parse(base)
	switch {
	case err != nil:
		return nil, fmt.Errorf("schema registry URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("schema registry URL %q: want http:// or https://HOST[:PORT]/PATH", base)
	case u.User != nil:
		// A password in the URL would be printed with every error
		// that quotes it.
		return nil, fmt.Errorf("schema registry URL: credentials belong in the user and password settings, not in the URL")
	}
	hc := &http.Client{Timeout: requestTimeout}
	if files != nil {
		if u.Scheme != "https" {
			return nil, fmt.Errorf("schema registry URL %q: TLS files need an https:// URL", base)
		}
		tc, err := files.Config("schema registry")
		if err != nil {
			return nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		hc.Transport = tr
	}
	return &client{base: strings.TrimRight(base, "/"), user: user, password: password, http: hc}, nil
}

// schemaRequest is the body of a registration or compatibility test.
type schemaRequest struct {
	SchemaType string `json:"schemaType"`
	Schema     string `json:"schema"`
}

// register registers schema (JSON Schema) under subject and returns its
// id; registering a schema the subject already has returns its id again.
func (c *client) register(ctx context.Context, subject string, schema []byte) (uint32, error) {
	var out struct {
		ID *int64 `json:"id"`
	}
	if err := c.do(ctx, subject, http.MethodPost, "/subjects/"+url.PathEscape(subject)+"/versions",
		schemaRequest{SchemaType: "JSON", Schema: string(schema)}, &out); err != nil {
		return 0, err
	}
	if out.ID == nil || *out.ID < 0 || *out.ID > 1<<32-1 {
		return 0, &Error{Subject: subject, Status: http.StatusOK, Err: fmt.Errorf("registration answered no usable id")}
	}
	return uint32(*out.ID), nil
}

// compatible tests schema against subject's latest version.
func (c *client) compatible(ctx context.Context, subject string, schema []byte) (bool, error) {
	var out struct {
		IsCompatible bool     `json:"is_compatible"`
		Messages     []string `json:"messages"`
	}
	err := c.do(ctx, subject, http.MethodPost, "/compatibility/subjects/"+url.PathEscape(subject)+"/versions/latest",
		schemaRequest{SchemaType: "JSON", Schema: string(schema)}, &out)
	return out.IsCompatible, err
}

// subjects lists the registry's subjects.
func (c *client) subjects(ctx context.Context) ([]string, error) {
	var out []string
	err := c.do(ctx, "", http.MethodGet, "/subjects", nil, &out)
	return out, err
}

// do sends one request and decodes a success's body into out; any other
// outcome is an *Error.
func (c *client) do(ctx context.Context, subject, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return &Error{Subject: subject, Err: err}
	}
	req.Header.Set("Accept", contentType+", application/json")
	if in != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &Error{Subject: subject, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return &Error{Subject: subject, Err: fmt.Errorf("read answer: %w", err)}
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Subject: subject, Status: resp.StatusCode}
		var answer struct {
			Code    int    `json:"error_code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &answer) == nil {
			e.Code, e.Message = answer.Code, answer.Message
		}
		return e
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &Error{Subject: subject, Status: resp.StatusCode, Err: fmt.Errorf("answer is not the expected JSON: %w", err)}
	}
	return nil
}
