package sink

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// Topic routes an event to a topic name by a template in which
// {aggregate_type} and {event_type} stand for the event's fields and any
// other {name} for the column of that name (decode.Event.Fields), then, if
// set, by a rewrite of the whole name (Debezium's route.topic.regex and
// route.topic.replacement).
type Topic struct {
	parts   []topicPart
	columns []string
	rewrite *regexp.Regexp // anchored: the whole name must match
	replace string
	spec    *TopicSpec     // how its missing topics are created; nil: Config.TopicSpec
	allow   *regexp.Regexp // anchored; nil: every name
	limit   *TopicLimit    // nil: no cap
}

// WithSpec returns t creating its missing topics as spec says.
func (t Topic) WithSpec(spec TopicSpec) Topic {
	t.spec = &spec
	return t
}

type topicPart struct {
	literal string
	field   func(*decode.Event) string // nil for a literal
}

var topicFields = map[string]func(*decode.Event) string{
	"aggregate_type": func(e *decode.Event) string { return e.AggregateType },
	"event_type":     func(e *decode.Event) string { return e.EventType },
}

// ParseTopic parses a topic template such as "outbox.event.{aggregate_type}".
// A template without braces is a fixed topic name.
func ParseTopic(template string) (Topic, error) {
	var t Topic
	rest := template
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			t.parts = append(t.parts, topicPart{literal: rest})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, topicPart{literal: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return Topic{}, fmt.Errorf("topic template %q: unclosed {", template)
		}
		name := rest[open+1 : open+end]
		f, ok := topicFields[name]
		switch {
		case name == "" || strings.ContainsAny(name, "{"):
			return Topic{}, fmt.Errorf("topic template %q: want {aggregate_type}, {event_type} or {COLUMN}", template)
		case !ok:
			f = func(e *decode.Event) string { return e.Fields[name] }
			t.columns = append(t.columns, name)
		}
		t.parts = append(t.parts, topicPart{field: f})
		rest = rest[open+end+1:]
	}
	if strings.IndexByte(template, '}') >= 0 && strings.Count(template, "}") != strings.Count(template, "{") {
		return Topic{}, fmt.Errorf("topic template %q: unmatched }", template)
	}
	if len(t.parts) == 1 && t.parts[0].field == nil {
		if err := validTopicName(template); err != nil {
			return Topic{}, err
		}
	}
	return t, nil
}

// Columns are the table columns the template names, besides the event's
// fields.
func (t Topic) Columns() []string { return t.columns }

// Rewrite returns t with its names rewritten: a name that regex matches
// whole becomes replacement, with $1, ${name} and so on standing for the
// regex's groups; any other name stays as it is.
func (t Topic) Rewrite(regex, replacement string) (Topic, error) {
	if regex == "" {
		return t, nil
	}
	re, err := regexp.Compile(`^(?:` + regex + `)$`)
	if err != nil {
		return Topic{}, fmt.Errorf("topic regex %q: %w", regex, err)
	}
	t.rewrite, t.replace = re, replacement
	return t, nil
}

// Name returns the topic of ev.
func (t Topic) Name(ev *decode.Event) string {
	if len(t.parts) == 1 && t.parts[0].field == nil && t.rewrite == nil {
		return t.parts[0].literal
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.field != nil {
			b.WriteString(p.field(ev))
		} else {
			b.WriteString(p.literal)
		}
	}
	name := b.String()
	if t.rewrite != nil && t.rewrite.MatchString(name) {
		return t.rewrite.ReplaceAllString(name, t.replace)
	}
	return name
}

// ValidateTopicName reports why Kafka would reject name as a topic name.
func ValidateTopicName(name string) error { return validTopicName(name) }

// validTopicName applies Kafka's rules for topic names, so that a routed name
// the broker would reject is reported with the reason instead of a broker
// error code.
func validTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > 249:
		return fmt.Errorf("topic name %.40q... is %d characters, Kafka allows 249", name, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q has %q; Kafka allows only a-z, A-Z, 0-9, '.', '_' and '-'", name, r)
		}
	}
	return nil
}

// Fixed returns the topic name when the template has no fields.
func (t Topic) Fixed() (string, bool) {
	if len(t.parts) == 1 && t.parts[0].field == nil && t.rewrite == nil {
		return t.parts[0].literal, true
	}
	return "", false
}

// prefix is the literal text before the template's first field.
func (t Topic) prefix() string {
	if len(t.parts) > 0 && t.parts[0].field == nil {
		return t.parts[0].literal
	}
	return ""
}

// Allow returns t refusing every routed name (after any rewrite) that
// regex does not match whole: such an event is dead-lettered with
// ReasonTopicNotAllowed, so that a value in a row cannot make the relay
// create or write any topic it likes. Empty: every name is allowed. A
// fixed topic the regex refuses is an error.
func (t Topic) Allow(regex string) (Topic, error) {
	if regex == "" {
		t.allow = nil
		return t, nil
	}
	re, err := regexp.Compile(`^(?:` + regex + `)$`)
	if err != nil {
		return Topic{}, fmt.Errorf("topic allow-list %q: %w", regex, err)
	}
	if name, ok := t.Fixed(); ok && !re.MatchString(name) {
		return Topic{}, fmt.Errorf("topic %s does not match the allow-list %q: every event would be dead-lettered", name, regex)
	}
	t.allow = re
	return t, nil
}

// Limit returns t admitting a new name only while l has room. A fixed
// topic is admitted at once and not counted: the cap bounds the names rows
// decide, and those must never crowd out a topic the configuration names.
func (t Topic) Limit(l *TopicLimit) Topic {
	t.limit = l
	if name, ok := t.Fixed(); ok && l != nil {
		l.reserve(name)
	}
	return t
}

// DefaultMaxTopics is the default cap on the topics a relay publishes to.
// An outbox has a topic per aggregate type, usually tens of them; a
// thousand leaves room for a large service and still stops a writer bug
// (user input in aggregate_type) before it floods the cluster with topics,
// the relay's memory with per-topic state and Prometheus with series.
const DefaultMaxTopics = 1000

// TopicLimit caps the distinct topics a relay publishes to by routing a
// row's values: the first max names admitted stay admitted for the life of
// the process, and an event routed to any other is refused
// (ReasonTopicLimit). Fixed topics of the configuration are admitted
// besides, uncounted. One limit is shared by
// every route and every writer of a relay (each session after a reconnect,
// the backfill), so the bound holds across them; it bounds the topics
// created in Kafka, the writer's per-topic state and the metric series by
// topic alike. Safe for concurrent use.
type TopicLimit struct {
	max int // 0: no cap, and nothing is recorded
	log *slog.Logger

	mu       sync.Mutex
	used     map[string]struct{}
	reserved map[string]struct{} // fixed topics: admitted, not counted
	full     bool                // said once in the log
}

// NewTopicLimit returns a cap of max topics; 0 is no cap. log (nil:
// slog.Default()) gets one line when the cap is first reached.
func NewTopicLimit(max int, log *slog.Logger) *TopicLimit {
	if log == nil {
		log = slog.Default()
	}
	return &TopicLimit{max: max, log: log, used: map[string]struct{}{}, reserved: map[string]struct{}{}}
}

// Len returns how many topics routed from rows are admitted (0 without a
// cap).
func (l *TopicLimit) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.used)
}

// admit reports whether topic is in use, or has been admitted now.
func (l *TopicLimit) admit(topic string) bool {
	if l.max <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.used[topic]; ok {
		return true
	}
	if _, ok := l.reserved[topic]; ok {
		return true
	}
	if len(l.used) < l.max {
		l.used[topic] = struct{}{}
		return true
	}
	if !l.full {
		l.full = true
		l.log.Warn("the topic cap is reached: events routed to any further topic are dead-lettered (topic_limit); topics in use keep working",
			slog.Int("max_topics", l.max), slog.String("first_refused", topic))
	}
	return false
}

// reserve admits topic without counting it: a fixed topic of the
// configuration.
func (l *TopicLimit) reserve(topic string) {
	if l.max <= 0 {
		return
	}
	l.mu.Lock()
	l.reserved[topic] = struct{}{}
	l.mu.Unlock()
}
