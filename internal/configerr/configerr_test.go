package configerr

import (
	"errors"
	"io/fs"
	"testing"
)

// flagName is a command line's naming: lower case, dashes, and the
// variable when the message asks for the setting.
func flagName(r Ref) string {
	n := map[string]string{"Stream.Max": "--max", "Kafka.SASL.Username": "--user", "Kafka.SASL.Mechanism": "--mech"}[r.Field]
	if n == "" {
		n = "?" + r.Field
	}
	switch {
	case r.Sources:
		return n + " (or VAR)"
	case r.Value != "":
		return n + "=" + r.Value
	}
	return n
}

func TestErrorSaysItsSettingsToEachAudience(t *testing.T) {
	for _, tt := range []struct {
		name      string
		err       *Error
		field     string
		goSays    string
		flagsSays string
	}{
		{"a setting and a value", New("Stream.Max", "{Stream.Max} %d: want at least 1", 0),
			"Stream.Max", "Stream.Max 0: want at least 1", "--max 0: want at least 1"},
		{"a value that looks like a reference stays a value", New("Stream.Max", "{Stream.Max} %q", "{Stream.Max}"),
			"Stream.Max", `Stream.Max "{Stream.Max}"`, `--max "{Stream.Max}"`},
		{"nested, with sources and values", New("Username", "{*Username} is required with {Mechanism=plain}").In("Kafka.SASL"),
			"Kafka.SASL.Username", "Kafka.SASL.Username is required with Kafka.SASL.Mechanism=plain",
			"--user (or VAR) is required with --mech=plain"},
		{"no field, a template's braces kept", New("", "topic {aggregate_type} 100%%"),
			"", "topic {aggregate_type} 100%", "topic {aggregate_type} 100%"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err.Field != tt.field {
				t.Errorf("Field %q, want %q", tt.err.Field, tt.field)
			}
			if got := tt.err.Error(); got != tt.goSays {
				t.Errorf("Error() %q, want %q", got, tt.goSays)
			}
			if got := tt.err.Render(flagName); got != tt.flagsSays {
				t.Errorf("Render %q, want %q", got, tt.flagsSays)
			}
		})
	}
}

func TestErrorUnwrapsItsCause(t *testing.T) {
	err := New("Dir", "{Dir}: %w", fs.ErrNotExist).In("Contracts")
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "Contracts.Dir: "+fs.ErrNotExist.Error() {
		t.Errorf("%v does not unwrap to fs.ErrNotExist", err)
	}
	if In("Kafka", errors.New("other")).Error() != "other" {
		t.Error("In changed an error that is not a setting's")
	}
}
