-- A job's plain configuration (a JSON object of string keys and values),
-- read by its runs through wasi:config/store.
ALTER TABLE job ADD COLUMN config TEXT NOT NULL DEFAULT '{}';
