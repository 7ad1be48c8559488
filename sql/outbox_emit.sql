-- Events without an outbox table: outbox_emit writes one event as a
-- transactional logical decoding message in the caller's transaction, the
-- same message outbox.Writer's Emit writes (docs/messages.md, version 1).
-- outbox-cdc relays it when the transaction commits, in commit order with
-- the transaction's rows; a rollback leaves nothing, and nothing is stored.
--
--   BEGIN;
--   UPDATE orders SET status = 'paid' WHERE id = 'o-1';
--   SELECT outbox_emit('order', 'o-1', 'OrderPaid', '{"id": "o-1"}', '{"correlation_id": "c-9"}');
--   COMMIT;
--
-- Install with psql -f sql/outbox_emit.sql in the schema your services use
-- (public by default). The callers need EXECUTE on
-- pg_logical_emit_message(boolean, text, bytea), which PUBLIC has unless it
-- was revoked. Both functions return the event's id. The prefix must be the
-- relay's --message-prefix (default outbox).

-- outbox_emit_bytes is the general form: any payload bytes, their media
-- type, an id of your own (default: a random UUID) and the prefix. Headers
-- are a JSON object: a string member gives its value, null is left out, any
-- other value gives its JSON text (as the headers column of an outbox table).
CREATE OR REPLACE FUNCTION outbox_emit_bytes(
    aggregate_type text,
    aggregate_id   text,
    event_type     text,
    payload        bytea,
    content_type   text  DEFAULT 'application/octet-stream',
    headers        jsonb DEFAULT NULL,
    id             text  DEFAULT NULL,
    prefix         text  DEFAULT 'outbox'
) RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    event_id text := coalesce(id, gen_random_uuid()::text);
    hdrs     bytea := '\x'::bytea;
    n        integer := 0;
    h        record;
BEGIN
    IF aggregate_id IS NULL OR aggregate_id = '' THEN
        RAISE EXCEPTION 'outbox_emit: aggregate_id is empty; it is the Kafka message key';
    END IF;
    IF event_id = '' OR aggregate_type IS NULL OR event_type IS NULL OR payload IS NULL OR content_type IS NULL OR prefix IS NULL THEN
        RAISE EXCEPTION 'outbox_emit: id, aggregate_type, event_type, payload, content_type and prefix must not be NULL (or an empty id)';
    END IF;
    IF headers IS NOT NULL AND jsonb_typeof(headers) <> 'object' THEN
        RAISE EXCEPTION 'outbox_emit: headers must be a JSON object, not %', jsonb_typeof(headers);
    END IF;
    FOR h IN
        SELECT convert_to(e.key, 'UTF8') AS k,
               convert_to(CASE jsonb_typeof(e.value) WHEN 'string' THEN e.value #>> '{}' ELSE e.value::text END, 'UTF8') AS v
        FROM jsonb_each(coalesce(headers, '{}'::jsonb)) AS e
        WHERE jsonb_typeof(e.value) <> 'null'
        ORDER BY e.key
    LOOP
        hdrs := hdrs || int4send(length(h.k)) || h.k || int4send(length(h.v)) || h.v;
        n := n + 1;
    END LOOP;
    PERFORM pg_logical_emit_message(true, prefix,
        '\x01'::bytea                                                                        -- version 1
        || int4send(length(convert_to(event_id, 'UTF8')))       || convert_to(event_id, 'UTF8')
        || int4send(length(convert_to(aggregate_type, 'UTF8'))) || convert_to(aggregate_type, 'UTF8')
        || int4send(length(convert_to(aggregate_id, 'UTF8')))   || convert_to(aggregate_id, 'UTF8')
        || int4send(length(convert_to(event_type, 'UTF8')))     || convert_to(event_type, 'UTF8')
        || int4send(length(convert_to(content_type, 'UTF8')))   || convert_to(content_type, 'UTF8')
        || int8send(0::bigint)                                                               -- time: the commit time
        || int4send(n) || hdrs
        || int4send(length(payload)) || payload);
    RETURN event_id;
END
$$;

-- outbox_emit is the common form: a JSON payload, sent as its jsonb text.
CREATE OR REPLACE FUNCTION outbox_emit(
    aggregate_type text,
    aggregate_id   text,
    event_type     text,
    payload        jsonb,
    headers        jsonb DEFAULT NULL
) RETURNS text
LANGUAGE sql VOLATILE
AS $$
    SELECT outbox_emit_bytes(aggregate_type, aggregate_id, event_type,
                             convert_to(payload::text, 'UTF8'), 'application/json', headers);
$$;
