-- 0015: a source's push webhook secret, sealed at rest like its Git
-- credentials (0008): internal/secretbox, AES-256-GCM, bound to the row's id
-- (a different binding than repo_password_sealed's, so that neither opens
-- in the other's place). It is write-only: the API says whether one is set,
-- never what it is. NULL: the source takes no webhook deliveries.
ALTER TABLE source ADD COLUMN webhook_secret_sealed bytea
    CHECK (octet_length(webhook_secret_sealed) > 0);
