-- Which admin may dispatch a pending run, until when. The admin that
-- writes a fire holds it; when that lease runs out with the run still
-- pending (its admin died), any admin may take it over.
ALTER TABLE run ADD COLUMN lease_owner TEXT;
ALTER TABLE run ADD COLUMN lease_until_ms INTEGER;
