package producer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/outbox-cdc/outbox-cdc/internal/configerr"
	"github.com/outbox-cdc/outbox-cdc/internal/kwire"
	"github.com/outbox-cdc/outbox-cdc/internal/tlsfiles"
)

// requestTimeout bounds one request of a Client; a produce request is
// bounded the same.
const requestTimeout = 30 * time.Second

// Security is how the writer reaches the brokers: over TLS, with SASL, both
// or neither. The zero value is plaintext without authentication.
type Security struct {
	TLS  *tls.Config    // nil: plaintext
	SASL sasl.Mechanism // nil: no authentication
}

// TLSFiles names what a TLS connection to the brokers needs.
type TLSFiles = tlsfiles.Files

// NewTLSConfig reads the files f names into a TLS client configuration.
func NewTLSConfig(f TLSFiles) (*tls.Config, error) { return f.Config("kafka") }

// SASLMechanism names a SASL mechanism: "" (none), plain, scram-sha-256
// or scram-sha-512.
type SASLMechanism string

// SASL is how the relay authenticates to the brokers: a mechanism and its
// credentials. The zero value is no authentication.
type SASL struct {
	Mechanism SASLMechanism
	Username  string
	Password  string // never logged
}

// Validate reports the first of s's settings that cannot work, as a
// *configerr.Error naming its field (Mechanism, Username or Password).
// Asked before any connection, so that SCRAM's refusal of a credential does
// not quote it, as the SCRAM library's own error does.
func (s SASL) Validate() error {
	m := s.Mechanism
	scramming := m == "scram-sha-256" || m == "scram-sha-512"
	switch {
	case m != "" && m != "plain" && !scramming:
		return configerr.New("Mechanism", "{Mechanism} %q: want plain, scram-sha-256 or scram-sha-512", m)
	case m != "" && s.Username == "":
		return configerr.New("Username", "{*Username} is required with {Mechanism}")
	case m != "" && s.Password == "":
		return configerr.New("Password", "{*Password} is required with {Mechanism}")
	case m == "" && (s.Username != "" || s.Password != ""):
		return configerr.New("Mechanism", "{Username} and {Password} need {Mechanism} (plain, scram-sha-256 or scram-sha-512)")
	case scramming && !saslPrepared(s.Username):
		return configerr.New("Username", "{Username} holds a character SCRAM refuses (SASLprep, RFC 4013: a control character, say)")
	case scramming && !saslPrepared(s.Password):
		return configerr.New("Password", "{Password} holds a character SCRAM refuses (SASLprep, RFC 4013: a control character, say)")
	}
	return nil
}

// saslPrepared reports whether SCRAM accepts s as a user name or password.
func saslPrepared(s string) bool {
	_, err := scram.Mechanism(scram.SHA256, "user", s) // a password is prepared as a user name is
	return err == nil
}

// NewSASL returns the mechanism named plain, scram-sha-256 or scram-sha-512.
func NewSASL(mechanism SASLMechanism, username, password string) (sasl.Mechanism, error) {
	switch mechanism {
	case "":
		return nil, nil
	case "plain":
		return plain.Mechanism{Username: username, Password: password}, nil
	case "scram-sha-256", "scram-sha-512":
		algo := scram.SHA256
		if mechanism == "scram-sha-512" {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, username, password)
		if err != nil {
			return nil, fmt.Errorf("kafka SASL %s: %w", mechanism, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("kafka SASL mechanism %q: want plain, scram-sha-256 or scram-sha-512", mechanism)
}

// Transport returns a kafka-go transport that connects as s says. Its
// connections are guarded (kwire.Dial): a broker's malformed answer fails
// the request and breaks its connection instead of crashing the process
// in the transport's goroutine. TLS is done in Dial, below the guard, so
// the transport's own TLS stays nil.
func (s Security) Transport() *kafka.Transport {
	return &kafka.Transport{
		Dial:        kwire.Dial(nil, s.TLS),
		SASL:        s.SASL,
		ClientID:    "outbox-cdc",
		DialTimeout: 5 * time.Second,
		IdleTimeout: 30 * time.Second,
		MetadataTTL: 6 * time.Second,
	}
}

// CountingTransport is Transport, with the size of every write to a broker
// reported to sent (the writer's Observer.Sent), and its metadata cached
// at most metadataTTL (0: 6 s).
func (s Security) CountingTransport(sent func(int), metadataTTL time.Duration) *kafka.Transport {
	t := s.Transport()
	if metadataTTL > 0 && metadataTTL < t.MetadataTTL {
		t.MetadataTTL = metadataTTL
	}
	d := &net.Dialer{}
	t.Dial = kwire.Dial(func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, sent: sent}, nil
	}, s.TLS)
	return t
}

type countingConn struct {
	net.Conn
	sent func(int)
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent(n)
	return n, err
}

// Ping asks the brokers for cluster metadata, so that a wrong address is
// reported at start instead of retried forever.
func Ping(ctx context.Context, brokers []string, sec Security) error {
	transport := sec.Transport()
	defer transport.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// As a client bootstraps: any one broker that answers will do.
	var errs error
	for _, b := range brokers {
		client := &kafka.Client{Addr: kafka.TCP(b), Timeout: 10 * time.Second, Transport: transport}
		_, err := client.Metadata(ctx, &kafka.MetadataRequest{})
		if err == nil {
			return nil
		}
		if errs == nil {
			errs = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("connect to kafka (%s): %w", Hint(errs, sec), errs)
}

// Hint says what to look at when the brokers cannot be reached.
func Hint(err error, sec Security) string {
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	switch {
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return "the broker refused the SASL credentials: check --kafka-sasl-username and the password"
	case errors.Is(err, kafka.UnsupportedSASLMechanism) || errors.Is(err, kafka.IllegalSASLState):
		return "the listener does not accept this SASL mechanism: check --kafka-sasl-mechanism"
	case errors.As(err, &certErr):
		return "the broker's certificate was not accepted: check --kafka-tls-ca-file and --kafka-tls-server-name"
	case errors.As(err, &recErr):
		return "the listener does not speak TLS: drop --kafka-tls, or use the broker's TLS port"
	case sec.TLS == nil && sec.SASL == nil:
		return "is it running, and is --kafka-brokers right? A secured listener needs --kafka-tls or --kafka-sasl-mechanism"
	}
	return "is it running, and is --kafka-brokers right?"
}

// Client returns a kafka-go client of brokers that connects as s says, for
// requests outside a Writer (exactly-once's transaction coordinator and
// checkpoint records). Close its transport's idle connections when done.
func (s Security) Client(brokers []string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: requestTimeout, Transport: s.Transport()}
}
