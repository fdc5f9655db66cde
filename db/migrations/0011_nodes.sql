-- 0011: nodes, the hosts services run on. An operator adds a node (with the
-- labels placement will read) and gets a one-time join token; the node's
-- agent exchanges it once for a credential and then heartbeats. Only hashes
-- of the token and the credential are stored.

CREATE TABLE node (
    -- name is the node's DNS-label name, as SLUICE_NODE_NAME gives it.
    name                 text        PRIMARY KEY CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    -- labels are the operator's (they decide placement); never the agent's.
    labels               jsonb       NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT now(),
    created_by           text        NOT NULL,
    -- join_token_hash is SHA-256 of the one-time join token; NULL once used.
    join_token_hash      bytea       UNIQUE,
    join_expires_at      timestamptz,
    -- credential_hash is SHA-256 of the node credential the join gave out.
    credential_hash      bytea       UNIQUE,
    credential_issued_at timestamptz,
    revoked_at           timestamptz,
    revoked_by           text,
    cordoned_at          timestamptz,
    cordoned_by          text,
    -- agent_instance names the agent process that heartbeats for the node:
    -- a second one is refused while the first is fresh.
    agent_instance       text,
    last_heartbeat_at    timestamptz,
    -- reported is what the agent says of its host (hostname, os, arch,
    -- agentVersion), shown apart from the labels.
    reported             jsonb       NOT NULL DEFAULT '{}',
    -- local is true for serve's own node: serve runs its host steps itself.
    local                boolean     NOT NULL DEFAULT false
);
