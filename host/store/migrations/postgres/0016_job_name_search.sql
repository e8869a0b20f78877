-- Jobs searched by part of their name through an index of the names'
-- trigrams (pg_trgm, which ships with PostgreSQL): a search of three
-- characters or more reads only the jobs whose names hold its trigrams,
-- not every job stored. Where the extension cannot be created (a role
-- without the right), searches still work, reading every name.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX job_name_trigrams ON job USING gin (LOWER(name) gin_trgm_ops);
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'no trigram index on job names (%): searches read every name', SQLERRM;
END
$$;
