-- The OpenTelemetry trace a run belongs to (32 hex digits), written with
-- its end when the admin exports traces; the console links it to the
-- operator's trace viewer.
ALTER TABLE run ADD COLUMN trace_id TEXT;
