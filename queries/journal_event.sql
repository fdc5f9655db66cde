-- name: JournalEventAppend :one
-- JournalEventAppend bumps the run's last_seq and inserts the event with it, so
-- seqs have no gaps and the run guard refuses events once the run is finished.
WITH bumped AS (
    UPDATE journal_run SET last_seq = last_seq + 1
    WHERE id = @run_id
    RETURNING id, last_seq
)
INSERT INTO journal_event (run_id, seq, level, message, data)
SELECT bumped.id, bumped.last_seq, @level, @message, sqlc.narg('data')
FROM bumped
RETURNING *;

-- name: JournalEventListAfter :many
SELECT * FROM journal_event
WHERE run_id = @run_id AND seq > @after_seq
ORDER BY seq
LIMIT @max_rows;
