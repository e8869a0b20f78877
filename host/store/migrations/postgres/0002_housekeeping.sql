-- Run retention and daily reports read runs by the time they were written.
CREATE INDEX run_by_created ON run (created_at_ms);
