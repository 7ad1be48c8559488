package predicate

import "testing"

// TestParseRestrictedAcceptsTypicalPollingPredicates: the predicates a
// polling relay's users already write to pick their pending rows stay
// accepted by --backfill-where's grammar; each is a pure function of the
// row's values and the clock.
func TestParseRestrictedAcceptsTypicalPollingPredicates(t *testing.T) {
	for _, where := range []string{
		"status = 'pending' and created_at < now() - interval '1 minute'",
		`"Sent" = false`,
		"processed_at is null",
		"coalesce(attempts,0) < 5",
		"event_type in ('A','B')",
		"published is not true",
		"event_type ~ '^Order'",
		"event_type !~ '^Test'",
		"event_type ~* 'order'",
		"event_type = any(array['A','B'])",
		"event_type = any('{A,B}')",
		"event_type <> all('{A,B}')",
		"created_at at time zone 'UTC' < now() at time zone 'UTC'",
		"event_type similar to 'Order%'",
		"case when attempts is null then true else attempts < 5 end",
		"processed_at is null and (locked_until is null or locked_until < now())",
		"extract(epoch from now() - created_at) > 60",
	} {
		if _, err := ParseRestricted("--backfill-where", where); err != nil {
			t.Errorf("%q: %v", where, err)
		}
	}
}
