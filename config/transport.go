package config

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
)

// Transport items say whether a connection can be read or altered on its
// way: `check` prints them, `run` logs those with status Warn once at start.

// pgFix is what turns a Postgres transport warning into an OK.
const pgFix = "add sslmode=verify-full and sslrootcert=FILE (the server's CA) to --postgres-url; verify-ca if the certificate does not name the host"

// PostgresTransport says whether each Postgres host --postgres-url names is
// reached over TLS with the server's certificate verified (sslmode
// verify-ca or verify-full), or is local (a Unix socket or a loopback
// address). Anything else, sslmode=prefer (libpq's default) included, can
// be read or altered by anyone on the path, the password with it.
func (c Config) PostgresTransport() checklist.Item {
	it := checklist.Item{Name: "postgres TLS"}
	pc, err := pgconn.ParseConfig(c.Relay.PostgresURL)
	if err != nil {
		it.Status, it.Detail = checklist.Skip, "--postgres-url cannot be parsed (see postgres reachable)"
		return it
	}
	// Each host, with each TLS setting pgconn tries on it: sslmode=prefer
	// is TLS unverified, then plaintext; a multi-host URL tries each host.
	type try struct {
		host string
		tls  *tls.Config
	}
	tries := []try{{net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port))), pc.TLSConfig}}
	for _, f := range pc.Fallbacks {
		tries = append(tries, try{net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))), f.TLSConfig})
	}
	var hosts []string             // not local, in the URL's order
	ways := map[string]*exposure{} // how each may be reached unverified
	hostnameUnchecked := false     // verify-ca somewhere: the chain is checked, not the name
	for _, t := range tries {
		if local(t.host) {
			continue
		}
		e := ways[t.host]
		if e == nil {
			e = &exposure{}
			hosts, ways[t.host] = append(hosts, t.host), e
		}
		switch {
		case t.tls == nil:
			e.plaintext = true
		case t.tls.InsecureSkipVerify && t.tls.VerifyPeerCertificate == nil:
			e.unverified = true
		case t.tls.InsecureSkipVerify:
			hostnameUnchecked = true
		}
	}
	var weak []string
	for _, h := range hosts {
		if w := ways[h].String(); w != "" {
			weak = append(weak, h+" by "+w)
		}
	}
	switch {
	case len(weak) > 0:
		it.Status, it.Fix = checklist.Warn, pgFix
		it.Detail = "reached " + strings.Join(weak, "; ") + ": anyone on the network path can read the events and the password, or pose as the server"
	case len(hosts) == 0:
		it.Status, it.Detail = checklist.OK, "local connection (Unix socket or loopback): nothing travels over a network"
	case hostnameUnchecked:
		it.Status, it.Detail = checklist.OK, "TLS, the server's certificate verified against sslrootcert (verify-ca: not its host name)"
	default:
		it.Status, it.Detail = checklist.OK, "TLS, the server's certificate and host name verified (verify-full)"
	}
	return it
}

// exposure is how pgconn may reach a host without verifying it.
type exposure struct{ plaintext, unverified bool }

func (e exposure) String() string {
	switch {
	case e.plaintext && e.unverified:
		return "unverified TLS or plaintext (sslmode prefer, libpq's default, or allow)"
	case e.plaintext:
		return "plaintext (sslmode disable)"
	case e.unverified:
		return "TLS without certificate verification (sslmode require)"
	}
	return ""
}

// KafkaTransport says whether the brokers are reached over TLS with their
// certificates verified, and warns where credentials or events travel in
// clear: SASL PLAIN without TLS (--kafka-sasl-allow-plaintext), or any
// plaintext listener off this machine.
func (c Config) KafkaTransport() checklist.Item {
	k := c.Relay.Kafka
	it := checklist.Item{Name: "kafka TLS"}
	const tlsFix = "use the brokers' TLS listener (SSL or SASL_SSL): --kafka-tls with --kafka-tls-ca-file"
	remote := false
	for _, b := range k.Brokers {
		remote = remote || !local(b)
	}
	switch {
	case k.UsesTLS() && k.TLSFiles.InsecureSkipVerify:
		it.Status, it.Detail = checklist.Warn, "TLS without certificate verification (--kafka-tls-insecure-skip-verify): anyone on the path can pose as a broker, read the events and the credentials"
		it.Fix = "drop --kafka-tls-insecure-skip-verify and give --kafka-tls-ca-file the CA that signs the brokers' certificates"
	case k.UsesTLS():
		it.Status, it.Detail = checklist.OK, "TLS, the brokers' certificates verified"
	case k.SASL.Mechanism == "plain":
		it.Status, it.Detail, it.Fix = checklist.Warn, "SASL PLAIN without TLS (--kafka-sasl-allow-plaintext): the password travels in clear, and the events too", tlsFix
	case remote && k.SASL.Mechanism != "":
		it.Status, it.Detail, it.Fix = checklist.Warn, "plaintext: the events travel in clear (SCRAM does not send the password, but an eavesdropper may guess it offline from the exchange)", tlsFix
	case remote:
		it.Status, it.Detail, it.Fix = checklist.Warn, "plaintext without authentication: the events travel in clear, and anyone who reaches the brokers may write to the topics", tlsFix
	default:
		it.Status, it.Detail = checklist.OK, "plaintext, to brokers on this machine only"
	}
	return it
}

// local reports whether a host, or a host:port, is this machine: a Unix
// socket directory, localhost or a loopback address.
func local(hostPort string) bool {
	if strings.HasPrefix(hostPort, "/") {
		return true
	}
	host := hostPort
	if h, _, err := net.SplitHostPort(hostPort); err == nil {
		host = h
	}
	if strings.HasPrefix(host, "/") || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RegistryTransport says whether the schema registry is reached over TLS,
// and warns where its basic auth password, or the schemas and ids it
// answers with, travel in clear: a registry on the path can answer with
// another schema's id, which every consumer then decodes the values by.
// Without a registry it is Skip.
func (c Config) RegistryTransport() checklist.Item {
	g := c.Relay.Contracts.Registry
	it := checklist.Item{Name: "schema registry TLS"}
	const fix = "use the registry's https:// URL (--schema-registry), with --schema-registry-ca-file if its certificate is not signed by a public CA"
	u, err := url.Parse(g.URL)
	switch {
	case g.URL == "" || err != nil:
		it.Status, it.Detail = checklist.Skip, "no --schema-registry"
	case u.Scheme == "https":
		it.Status, it.Detail = checklist.OK, "TLS, the registry's certificate verified"
	case g.User != "":
		it.Status, it.Detail, it.Fix = checklist.Warn, "http://: the basic auth password travels in clear, and the schemas too", fix
	case !local(u.Host):
		it.Status, it.Detail, it.Fix = checklist.Warn, "http://: anyone on the path can read the schemas and answer with another schema id, which consumers decode the values by", fix
	default:
		it.Status, it.Detail = checklist.OK, "plaintext, to a registry on this machine only"
	}
	return it
}

// TransportWarnings are the transport items with status Warn, one line each
// with its fix, for run to log once at start.
func (c Config) TransportWarnings() []string {
	var out []string
	for _, it := range []checklist.Item{c.PostgresTransport(), c.KafkaTransport(), c.RegistryTransport()} {
		if it.Status == checklist.Warn {
			out = append(out, fmt.Sprintf("%s: %s; fix: %s", it.Name, it.Detail, it.Fix))
		}
	}
	return out
}
