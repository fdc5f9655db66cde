-- 0028: the values of the secrets a host step needs travel with its node
-- task, sealed. An apply task whose unit takes secrets holds their values in
-- secrets_sealed (internal/secretbox, bound to the task's id, with the key
-- that lives outside the database), never in its payload: the payload holds
-- the references only. The node's agent is handed the values when it claims
-- the task, and the column is cleared when the task is done or abandoned,
-- so that no value stays at rest once the step is over.
ALTER TABLE node_task ADD COLUMN secrets_sealed bytea
    CHECK (octet_length(secrets_sealed) > 0);
