package relay

import (
	"net/url"
	"strings"
)

// fileSettings are the connection settings that name a file pgconn reads
// while parsing, the TLS ones first.
var fileSettings = []string{"sslrootcert", "sslcert", "sslkey", "sslpassword", "service", "servicefile"}

// withoutFiles is conn, a URL or key=value string, with fileSettings
// emptied: what parsing it judges is then its syntax alone.
func withoutFiles(conn string) string {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return conn // pgconn says why
		}
		q := u.Query()
		for _, k := range fileSettings {
			q.Del(k)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	// key=value: a later setting overrides an earlier one, and an empty
	// TLS file is none (a service named here is still read: its mere
	// presence makes pgconn look it up).
	for _, k := range fileSettings[:4] {
		conn += " " + k + "=''"
	}
	return conn
}
