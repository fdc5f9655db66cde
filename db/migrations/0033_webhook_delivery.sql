-- 0033: the webhook deliveries a source received, by the host's delivery
-- id: a delivery seen before (a replay, or the host's retry of one that
-- was answered) is acknowledged and does nothing. Rows older than a week
-- are dropped as new ones arrive: hosts redeliver within hours.
CREATE TABLE webhook_delivery (
    source_id   uuid        NOT NULL REFERENCES source (id) ON DELETE CASCADE,
    delivery    text        NOT NULL CHECK (delivery <> ''),
    git_commit  text        NOT NULL,
    run_id      uuid,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, delivery)
);
CREATE INDEX webhook_delivery_received ON webhook_delivery (source_id, received_at);
