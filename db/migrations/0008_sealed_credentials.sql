-- 0008: a source's Git password or token is sealed at rest, with a key that
-- lives outside the database (SLUICE_SECRET_KEY, or the key file in the data
-- dir): a dump or a copy of the database shows no credential.
--
-- repo_password_sealed is what internal/secretbox sealed: a version byte
-- (1), the sealing key's id, a nonce and AES-256-GCM ciphertext, bound to
-- the row's id. NULL: the source has no credentials.
ALTER TABLE source ADD COLUMN repo_password_sealed bytea
    CHECK (octet_length(repo_password_sealed) > 0);

-- The key is not in the database, so SQL cannot seal what repo_password
-- held. Each value moves over tagged with the version byte 0 (plaintext
-- awaiting its seal), and the next `sluice serve` seals every such value
-- before it serves (gitops.Service.SealCredentials). Until then the value
-- is as readable as it was in repo_password, which is dropped here so that
-- no plaintext column is left.
UPDATE source
SET repo_password_sealed = '\x00'::bytea || convert_to(repo_password, 'UTF8')
WHERE repo_password IS NOT NULL AND repo_password <> '';

ALTER TABLE source DROP COLUMN repo_password;
