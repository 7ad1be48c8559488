// Package inbox is for the services that consume events: an idempotent
// consumer. outbox-cdc delivers at least once, so after a crash a consumer
// may see an event again. Claim records the event's id in an inbox table
// inside the consumer's own transaction, under a unique key, and reports
// whether it was the first time: the side effect and the dedupe record then
// commit, or roll back, together.
//
// The package imports no Kafka client, so a service compiles only the one it
// uses: FromHeaders takes any client's headers, and the subpackages
// inbox/kafkago and inbox/franz adapt segmentio/kafka-go messages and
// twmb/franz-go records.
//
//	rec, err := kafkago.FromMessage(msg) // or franz.FromRecord(r), or inbox.FromHeaders(…)
//	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		first, err := box.Claim(ctx, tx, rec)
//		if err != nil || !first {
//			return err // seen before: already applied
//		}
//		return apply(ctx, tx, msg)
//	})
package inbox
