-- A job's outbound HTTP: the origins it may call and its limits per run
-- (a JSON object {"allow": [...], "limits": {...}}).
ALTER TABLE job ADD COLUMN http TEXT NOT NULL DEFAULT '{}';
-- The origins a tenant's jobs may be granted (a JSON array). A tenant
-- without a row may be granted none.
CREATE TABLE tenant_http_ceiling (
    tenant TEXT PRIMARY KEY,
    origins TEXT NOT NULL
);
