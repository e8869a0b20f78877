-- Smaller run rows: the digest of the module a run ran was 64 hex
-- characters in every row (66 bytes of it); it is now the sha256's 32
-- bytes in module_sha, and module_digest is left empty for runs written
-- from here on (see store/rows.rs, `run_digest`). Runs written before keep
-- their text and read as before: adding a column rewrites nothing, where
-- changing module_digest's type would rewrite the whole run table at
-- start-up.
ALTER TABLE run ADD COLUMN module_sha BLOB;
