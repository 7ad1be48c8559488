package redact

import "testing"

// TestRedactByPosition: passwords are blanked where they stand (a URL's
// userinfo or query, a password= key), and nowhere else: a password that is
// also a word, or a letter, leaves the words that contain it alone, which
// would otherwise reveal it.
func TestRedactByPosition(t *testing.T) {
	const hint = "connect to postgres (is --postgres-url right?): failed to connect to `user=postgres database=app`: dial tcp: connection refused"
	tests := []struct {
		name, in, want string
	}{
		// The password is never searched for, so with "postgres", "e" or
		// "connect" as the password, words stay whole.
		{"no password position: words untouched", hint, hint},
		{"password postgres, in a URL",
			"cannot parse `postgres://postgres:postgres@db:5432/app?x=1`: bad", "cannot parse `postgres://postgres:xxxxx@db:5432/app?x=1`: bad"},
		{"one-letter password, in a URL", "url postgres://u:e@db/app: " + hint, "url postgres://u:xxxxx@db/app: " + hint},
		{"a common word, key=value",
			"cannot parse `host=db user=relay password=connect dbname=app`: " + hint,
			"cannot parse `host=db user=relay password=xxxxx dbname=app`: " + hint},
		{"URL-encoded",
			"bad url postgres://u:p%40ss+w0rd@db/app (p@ss elsewhere)", "bad url postgres://u:xxxxx@db/app (p@ss elsewhere)"},
		{"URL-encoded slash and space",
			"postgresql://u:a%2Fb%20c@db/app", "postgresql://u:xxxxx@db/app"},
		{"query password and sslpassword",
			"postgres://u@db/app?sslpassword=k3y&password=s3cret&sslmode=verify-full",
			"postgres://u@db/app?sslpassword=xxxxx&password=xxxxx&sslmode=verify-full"},
		{"multi-host URL",
			"postgres://u:pw1@h1:5432,h2:5433/app?target_session_attrs=primary", "postgres://u:xxxxx@h1:5432,h2:5433/app?target_session_attrs=primary"},
		{"quoted key=value",
			`host=db password='a \'quoted\' pw' sslpassword = k3y user=u`, `host=db password=xxxxx sslpassword=xxxxx user=u`},
		{"another scheme", "proxy http://u:hunter2@proxy:3128/ refused", "proxy http://u:xxxxx@proxy:3128/ refused"},
		{"SASL password that is a word",
			"kafka reachable: brokers kafka-0:9092", "kafka reachable: brokers kafka-0:9092"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.want {
				t.Errorf("redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}
