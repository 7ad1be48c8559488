-- Reference DDL for outbox-cdc: the outbox table and the publication.
-- outbox-cdc creates the publication and the replication slot itself when they
-- are missing; run this yourself if you manage schema by migrations.

CREATE TABLE IF NOT EXISTS public.outbox (
    id             uuid        PRIMARY KEY,
    aggregate_type text        NOT NULL,  -- routes the topic: outbox.event.{aggregate_type}
    aggregate_id   text        NOT NULL,  -- the Kafka message key: one aggregate, one partition
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,  -- the Kafka message value (its text form)
    headers        jsonb,                 -- optional: string members become Kafka headers
    created_at     timestamptz NOT NULL DEFAULT now()  -- the Kafka message timestamp
);

-- INSERTs only: outbox-cdc publishes rows as they were inserted, so deleting
-- them (in the same transaction or later) does not retract anything.
CREATE PUBLICATION outbox_cdc FOR TABLE public.outbox WITH (publish = 'insert');

-- The slot outbox-cdc creates on first start (plugin pgoutput):
--   SELECT pg_create_logical_replication_slot('outbox_cdc', 'pgoutput');
-- A slot pins WAL until it is read: drop it when you retire outbox-cdc:
--   SELECT pg_drop_replication_slot('outbox_cdc');
