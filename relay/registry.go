package relay

import (
	"log/slog"
	"net/url"

	"github.com/outbox-cdc/outbox-cdc/internal/tlsfiles"
	"github.com/outbox-cdc/outbox-cdc/registry"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// Registry is the Confluent-compatible schema registry the contracts are
// registered with (package registry). With a URL, each event whose type
// has a contract gets the registry's wire format as its value: 0x00, the
// schema id of its contract under the subject <topic>-<event type>
// (4 bytes, big-endian), then the payload unchanged; an event type without
// a contract (Contracts.Unknown = allow) and a tombstone are sent as
// without a registry. A registry that does not answer holds publishing
// back until it does; one that refuses a contract makes its events invalid
// (reason schema_registry_refused).
type Registry struct {
	// URL is the API's base (--schema-registry), such as
	// http://registry:8081 or Apicurio's http://HOST:8080/apis/ccompat/v7;
	// empty: no registry, values unframed.
	URL string
	// User and Password are basic auth credentials
	// (--schema-registry-user, --schema-registry-password); both or
	// neither. The password is never logged.
	User, Password string
	// CAFile is the PEM CA certificates that sign the registry's
	// certificate (--schema-registry-ca-file); empty: the system's roots.
	// CertFile and KeyFile are a PEM client certificate and its key, for a
	// registry that requires mutual TLS (--schema-registry-cert-file,
	// --schema-registry-key-file). Each needs an https:// URL.
	CAFile, CertFile, KeyFile string
}

// tls is the TLS files of g, nil when it names none.
func (g Registry) tls() *tlsfiles.Files {
	if g.CAFile == "" && g.CertFile == "" && g.KeyFile == "" {
		return nil
	}
	return &tlsfiles.Files{CAFile: g.CAFile, CertFile: g.CertFile, KeyFile: g.KeyFile}
}

// RegistryConfig is what registry.New needs of g, with the contracts docs.
func (g Registry) RegistryConfig(docs registry.Documents, log *slog.Logger) registry.Config {
	return registry.Config{URL: g.URL, User: g.User, Password: g.Password, TLS: g.tls(), Documents: docs, Logger: log}
}

// validateRegistry checks the registry's settings against the contracts'
// and the envelope's.
func (c Config) validateRegistry() error {
	g := c.Contracts.Registry
	if g.URL == "" {
		if g.User != "" || g.Password != "" || g.tls() != nil {
			return bad("Contracts.Registry.URL", "{Contracts.Registry.User}, {Contracts.Registry.Password} and the TLS files ({Contracts.Registry.CAFile}, {Contracts.Registry.CertFile}, {Contracts.Registry.KeyFile}) need {Contracts.Registry.URL}")
		}
		return nil
	}
	u, err := url.Parse(g.URL)
	switch {
	case err == nil && u.User != nil: // checked first: the URL is not quoted then
		return bad("Contracts.Registry.URL", "{Contracts.Registry.URL}: put the credentials in {Contracts.Registry.User} and {*Contracts.Registry.Password}, not in the URL")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return bad("Contracts.Registry.URL", "{Contracts.Registry.URL} %q: want the base URL of a Confluent-compatible API, http(s)://HOST:PORT[/PATH] (Apicurio's ends in /apis/ccompat/v7)", g.URL)
	case g.tls() != nil && u.Scheme != "https":
		return bad("Contracts.Registry.URL", "{Contracts.Registry.URL} %q: the TLS files ({Contracts.Registry.CAFile}, {Contracts.Registry.CertFile}, {Contracts.Registry.KeyFile}) need an https:// URL", g.URL)
	case (g.CertFile == "") != (g.KeyFile == ""):
		return bad("Contracts.Registry.CertFile", "{Contracts.Registry.CertFile} and {Contracts.Registry.KeyFile} go together: give both or neither")
	case (g.User == "") != (g.Password == ""):
		return bad("Contracts.Registry.User", "{Contracts.Registry.User} and {*Contracts.Registry.Password} go together: give both or neither")
	case c.Contracts.Dir == "":
		return bad("Contracts.Registry.URL", "{Contracts.Registry.URL} needs {Contracts.Dir}: the contracts are what is registered, and only events with one are framed")
	case c.Producer.Envelope != sink.EnvelopeRaw:
		return bad("Contracts.Registry.URL", "{Contracts.Registry.URL} frames the record value as the registry's wire format (0x00, the schema id, the payload), which needs {Producer.Envelope=raw}: {Producer.Envelope} %s wraps the payload in a document, or announces the value's content type (cloudevents' content-type header), which a framed value would contradict", c.Producer.Envelope)
	}
	return nil
}

// registry is what sink frames values with: nil without a URL. contracts
// are the loaded contracts (a *contract.Set).
func (c Contracts) registry(contracts sink.Contracts, log *slog.Logger) (sink.Registry, error) {
	docs, ok := contracts.(registry.Documents)
	if c.Registry.URL == "" || !ok {
		return nil, nil // a nil interface, not a nil *registry.Registry in one
	}
	reg, err := registry.New(c.Registry.RegistryConfig(docs, log))
	if err != nil {
		return nil, bad("Registry.URL", "{Registry.URL}: %w", err)
	}
	return reg, nil
}
