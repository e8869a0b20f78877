-- The oldest schema version whose admins may still serve this database
-- (store/schema.rs): migrations expand within a minor version and leave it
-- alone; a migration that contracts (drops or renames what an older admin
-- reads) raises it, so an admin too old for the database refuses to start
-- instead of failing its queries. Admins from this schema on check it.
CREATE TABLE schema_compatibility (oldest_reader BIGINT NOT NULL);
INSERT INTO schema_compatibility (oldest_reader) VALUES (29);
