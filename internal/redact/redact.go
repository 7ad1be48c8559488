// Package redact blanks passwords out of what outbox-cdc prints: log
// lines and error messages, which may quote a connection string.
package redact

import (
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// redacted replaces a password.
const redacted = "xxxxx"

var (
	// urlToken is a URL as it stands in a sentence: it ends at white space,
	// a quote or a bracket that closes a quotation.
	urlToken = regexp.MustCompile("(?i)\\b[a-z][a-z0-9+.-]*://[^\\s'\"`<>]+")
	// keyValuePassword is password= or sslpassword= in key=value form, its
	// value quoted (with \-escapes) or up to the next white space.
	keyValuePassword = regexp.MustCompile(`(?i)((?:ssl)?password)\s*=\s*(?:'(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.)*)`)
)

// String blanks the passwords in s, text bound for a log line or an error
// message: pgx errors may quote the connection string they were given.
//
// A password is found by where it stands, a URL's userinfo or query
// (password=, sslpassword=) or a key=value password, never by its value:
// replacing a value everywhere mangles every word that contains it, which
// reveals it (with the password "postgres", "connect to postgres" read
// "connect to xxxxx"). The SASL password is not searched for: nothing
// outbox-cdc prints holds it (config refuses a password SCRAM cannot use
// with a message that does not quote it, the one dependency error that
// would), and any search for it would mangle words again.
func String(s string) string {
	if !strings.Contains(s, "://") && !strings.Contains(strings.ToLower(s), "password") {
		return s // the common case, cheaply
	}
	var b strings.Builder
	last := 0
	for _, m := range urlToken.FindAllStringIndex(s, -1) {
		b.WriteString(redactKeyValues(s[last:m[0]]))
		b.WriteString(redactURL(s[m[0]:m[1]]))
		last = m[1]
	}
	b.WriteString(redactKeyValues(s[last:]))
	return b.String()
}

func redactKeyValues(s string) string {
	return keyValuePassword.ReplaceAllString(s, "${1}="+redacted)
}

// redactURL blanks u's passwords. A Postgres URL gets pgconn's own
// redaction, which follows its parser: the userinfo password and the
// password and sslpassword query values, even in a URL it cannot parse.
// Another URL gets net/url's.
func redactURL(u string) string {
	lower := strings.ToLower(u)
	if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		// pgconn redacts only in a ParseConfigError's message, as
		// "cannot parse `URL`: ".
		msg := pgconn.NewParseConfigError(u, "", nil).Error()
		if r, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
			if r, ok := strings.CutSuffix(r, "`: "); ok {
				return r
			}
		}
		return u[:strings.Index(u, "://")+3] + redacted // pgconn changed its message: blank it all
	}
	if p, err := url.Parse(u); err == nil {
		if _, ok := p.User.Password(); ok {
			return p.Redacted()
		}
		return u
	}
	if at := strings.LastIndexByte(u, '@'); at >= 0 {
		return u[:strings.Index(u, "://")+3] + redacted + u[at:]
	}
	return u
}

// ReplaceAttr, a slog.HandlerOptions.ReplaceAttr, redacts every string,
// error and Stringer attribute, and the message.
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(String(a.Value.String()))
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			a.Value = slog.StringValue(String(v.Error()))
		case fmt.Stringer:
			a.Value = slog.StringValue(String(v.String()))
		}
	}
	return a
}
