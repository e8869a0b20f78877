-- Jobs searched by part of their name through an index of the names'
-- trigrams (FTS5, case-insensitive), kept by triggers: a search of three
-- characters or more reads only the jobs whose names hold its trigrams,
-- not every job stored.
CREATE VIRTUAL TABLE job_name_search USING fts5(
    name, content = 'job', content_rowid = 'id', tokenize = 'trigram'
);

CREATE TRIGGER job_name_added AFTER INSERT ON job
BEGIN
    INSERT INTO job_name_search (rowid, name) VALUES (NEW.id, NEW.name);
END;

CREATE TRIGGER job_name_removed AFTER DELETE ON job
BEGIN
    INSERT INTO job_name_search (job_name_search, rowid, name) VALUES ('delete', OLD.id, OLD.name);
END;

CREATE TRIGGER job_name_changed AFTER UPDATE OF name ON job
BEGIN
    INSERT INTO job_name_search (job_name_search, rowid, name) VALUES ('delete', OLD.id, OLD.name);
    INSERT INTO job_name_search (rowid, name) VALUES (NEW.id, NEW.name);
END;

INSERT INTO job_name_search (job_name_search) VALUES ('rebuild');
