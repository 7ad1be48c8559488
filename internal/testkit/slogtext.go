package testkit

import (
	"strconv"
	"strings"
)

// LogRecord is one line of a relay's log (slog's text format) as its
// attributes: time, level, msg and the rest, group keys dotted, quoted
// values unquoted.
type LogRecord map[string]string

// LogRecords returns the lines of log (a relay's LogText) whose msg is
// msg, in order. Lines slog did not write (a race report, a goroutine
// dump) are skipped: tests assert on the lines the relay promises, by
// attribute, so a reordered or added attribute does not break them.
func LogRecords(log, msg string) []LogRecord {
	var out []LogRecord
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg=") {
			continue
		}
		if rec := ParseLogLine(line); rec != nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// ParseLogLine splits one slog text line into its key=value attributes;
// nil when the line is not one (a value's quotes do not close).
func ParseLogLine(line string) LogRecord {
	rec := LogRecord{}
	rest := strings.TrimSpace(line)
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || strings.ContainsAny(rest[:eq], " \"") {
			return nil
		}
		key := rest[:eq]
		rest = rest[eq+1:]
		var value string
		if strings.HasPrefix(rest, `"`) {
			quoted, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil
			}
			if value, err = strconv.Unquote(quoted); err != nil {
				return nil
			}
			rest = rest[len(quoted):]
		} else {
			end := strings.IndexByte(rest, ' ')
			if end < 0 {
				end = len(rest)
			}
			value, rest = rest[:end], rest[end:]
		}
		rec[key] = value
		rest = strings.TrimLeft(rest, " ")
	}
	return rec
}
