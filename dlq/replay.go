package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// Options say where and whether a replay publishes.
type Options struct {
	ToTopic string // publish every selected dead letter here, not to the topic it was meant for
	DryRun  bool   // say what would be done, publish nothing
}

// Actions, an Outcome's fate.
const (
	Replayed    = "replayed"
	WouldReplay = "would_replay" // a dry run's Replayed
	Skipped     = "skipped"      // cannot be replayed as it is; Why says why
	Failed      = "failed"       // Kafka refused it, or its topic does not exist
	HeldBack    = "held_back"    // not sent: an earlier dead letter of its key failed
)

// Outcome is what a replay did with one selected dead letter.
type Outcome struct {
	Entry
	To      string `json:"to,omitempty"` // the topic it was (or would be) published to
	Action  string `json:"action"`
	Why     string `json:"why,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// Report says what a replay did: per topic how many were replayed, and the
// fate of each selected dead letter, in partition and offset order.
type Report struct {
	DryRun   bool           `json:"dry_run"`
	Replayed map[string]int `json:"replayed"` // by topic; in a dry run, what would be
	Skipped  int            `json:"skipped"`
	Failed   int            `json:"failed"` // held back included
	Outcomes []Outcome      `json:"outcomes"`
}

// Chunks of a replay: one produce request per destination partition, at
// most this many records and (but for one larger record) bytes.
const (
	chunkRecords = 100
	chunkBytes   = 1 << 20
)

// Replay publishes the selected dead letters again, each to the topic it
// was meant for (or opts.ToTopic), in offset order per dead-letter
// partition, with acks=all: to the partition its row's partition column
// named, if it named one (one the topic lacks fails the dead letter: it is
// never sent to another), else to its key's. A dead letter that fails holds back the later
// ones of its key, so that a key's events keep their order. Replaying twice
// publishes twice: consumers that deduplicate by the id header (package
// inbox) see each event once. The error is for what stopped the replay
// (the brokers unreachable, ctx ended); the report says what it did so far.
func Replay(ctx context.Context, cfg Config, sel Selection, opts Options) (*Report, error) {
	if cfg.Admission.Reserved.DeadLetter == "" {
		cfg.Admission.Reserved.DeadLetter = cfg.Topic
	}
	cluster := cfg.connect()
	defer cluster.Close()
	rp := &replay{Report: Report{DryRun: opts.DryRun, Replayed: map[string]int{}}, opts: opts, admission: cfg.Admission,
		cluster: cluster, topics: map[string]topicState{}, failedKeys: map[string]bool{}}
	if !opts.DryRun {
		rp.pub = cluster.NewPublisher(chunkRecords)
		defer rp.pub.Close()
	}
	err := scan(ctx, cluster, cfg.Topic, sel, true, func(es []Entry) error { return rp.entries(ctx, es) })
	return &rp.Report, err
}

type replay struct {
	Report
	opts       Options
	admission  sink.Admission
	cluster    *producer.Cluster
	pub        *producer.Publisher
	topics     map[string]topicState // as the broker answered, once per topic
	failedKeys map[string]bool       // keys of dead letters that failed
}

// topicState is what a replay needs to know of a topic it publishes to.
type topicState struct {
	partitions int
	why        error // nil, or why it cannot be published to
}

// entries replays es, one fetch of one partition, in chunks.
func (rp *replay) entries(ctx context.Context, es []Entry) error {
	var chunk []int // indexes into rp.Outcomes
	size := 0
	flush := func() {
		if len(chunk) > 0 {
			rp.send(ctx, chunk)
		}
		chunk, size = chunk[:0], 0
	}
	for _, e := range es {
		o, err := rp.plan(ctx, e)
		if err != nil {
			return err
		}
		rp.Outcomes = append(rp.Outcomes, o)
		if o.Action != "" {
			rp.settle(len(rp.Outcomes) - 1)
			continue
		}
		if len(chunk) == chunkRecords || len(chunk) > 0 && size+e.bytes() > chunkBytes {
			flush()
		}
		chunk, size = append(chunk, len(rp.Outcomes)-1), size+e.bytes()
	}
	flush()
	return ctx.Err()
}

// plan decides e's destination, or its fate when it cannot be sent.
func (rp *replay) plan(ctx context.Context, e Entry) (Outcome, error) {
	o := Outcome{Entry: e, To: e.Topic}
	if rp.opts.ToTopic != "" {
		o.To = rp.opts.ToTopic
	}
	if why := e.unreplayable(rp.opts.ToTopic); why != "" {
		o.To, o.Action, o.Why = "", Skipped, why
		return o, nil
	}
	// As run would have admitted it, by its table's route: a replay puts
	// nothing where run would not have, --to-topic included.
	if perr := rp.admission.Admit(e.Table, o.To); perr != nil {
		o.Action, o.Refused, o.Why = Skipped, perr.Reason, perr.Reason+": "+perr.Err.Error()
		return o, nil
	}
	if !e.NullKey && rp.failedKeys[e.Key] {
		o.Action, o.Why = HeldBack, "an earlier dead letter of its key failed"
		return o, nil
	}
	st, err := rp.topic(ctx, o.To)
	if err != nil {
		return o, err
	}
	_, _, why := e.partitionIn(o.To, st.partitions)
	switch {
	case st.why != nil:
		o.Action, o.Why = Failed, st.why.Error()
	case why != "":
		o.Action, o.Why = Failed, why
	case rp.DryRun:
		o.Action = WouldReplay
	}
	return o, nil
}

// topic says how many partitions topic has, or why it cannot be published
// to, asking the broker once per topic. The error is for a broker that
// cannot be asked.
func (rp *replay) topic(ctx context.Context, topic string) (topicState, error) {
	if st, ok := rp.topics[topic]; ok {
		return st, nil
	}
	parts, err := rp.cluster.Partitions(ctx, topic)
	var te *producer.TopicError
	var st topicState
	switch {
	case errors.As(err, &te) && errors.Is(te.Err, producer.ErrNotInAnswer):
		st.why = fmt.Errorf("topic %s is not in the broker's answer", topic)
	case errors.As(err, &te) && errors.Is(te.Err, producer.ErrUnknownTopic):
		st.why = fmt.Errorf("topic %s does not exist; create it (a replay creates no topic)", topic)
	case errors.As(err, &te):
		st.why = fmt.Errorf("topic %s: %w", topic, te.Err)
	case err != nil:
		return topicState{}, err
	default:
		st.partitions = len(parts)
	}
	rp.topics[topic] = st
	return st, nil
}

// send publishes a chunk; what Kafka refuses is sent again one by one, in
// order, so that a request too large for the topic as a whole still goes.
func (rp *replay) send(ctx context.Context, chunk []int) {
	msgs := make([]producer.Message, len(chunk))
	for i, j := range chunk {
		msgs[i] = rp.Outcomes[j].message(rp.Outcomes[j].To)
	}
	errs := rp.pub.Publish(ctx, msgs)
	for i, j := range chunk {
		o := &rp.Outcomes[j]
		switch {
		case errs[i] == nil:
			o.Action = Replayed
		case !o.NullKey && rp.failedKeys[o.Key]:
			o.Action, o.Why = HeldBack, "an earlier dead letter of its key failed"
		default:
			if err := rp.pub.Publish(ctx, msgs[i:i+1])[0]; err != nil {
				o.Action, o.Why = Failed, err.Error()
			} else {
				o.Action = Replayed
			}
		}
		rp.settle(j)
	}
}

// settle counts outcome i, whose action is decided.
func (rp *replay) settle(i int) {
	o := &rp.Outcomes[i]
	switch o.Action {
	case Replayed, WouldReplay:
		rp.Replayed[o.To]++
	case Skipped:
		rp.Skipped++
	case Failed, HeldBack:
		rp.Failed++
		if !o.NullKey {
			rp.failedKeys[o.Key] = true
		}
	}
	o.key, o.value, o.headers = nil, nil, nil // the report keeps what it shows
}
