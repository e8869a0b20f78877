-- Smaller run rows: the digest of the module a run ran was 64 hex
-- characters in every row; it is now the sha256's 32 bytes in module_sha,
-- and module_digest is left empty for runs written from here on (see
-- store/rows.rs, `run_digest`). Runs written before keep their text and
-- read as before. A nullable column without a default is added to the
-- catalog only (every partition too): nothing is rewritten.
ALTER TABLE run ADD COLUMN module_sha bytea;
