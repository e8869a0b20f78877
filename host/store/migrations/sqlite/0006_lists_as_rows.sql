-- Lists that were comma-joined text become rows, one per element: the
-- database keeps each list free of duplicates, and queries can use them
-- (who names a job as a child, which version a label is on).

-- A job's children, in the order given.
CREATE TABLE job_child (
    job_id    INTEGER NOT NULL,
    position  INTEGER NOT NULL,
    child_id  INTEGER NOT NULL,
    PRIMARY KEY (job_id, child_id)
);
CREATE INDEX job_child_by_child ON job_child (child_id);

WITH RECURSIVE split(job_id, position, item, rest) AS (
    SELECT id, 0, '', children || ',' FROM job WHERE children <> ''
    UNION ALL
    SELECT job_id, position + 1, trim(substr(rest, 1, instr(rest, ',') - 1)),
           substr(rest, instr(rest, ',') + 1)
    FROM split WHERE rest <> ''
)
INSERT INTO job_child (job_id, position, child_id)
    SELECT job_id, position, CAST(item AS INTEGER) FROM split
    WHERE position > 0 AND item <> '' AND true
    ON CONFLICT (job_id, child_id) DO NOTHING;

ALTER TABLE job DROP COLUMN children;

-- The labels of a module's versions: a label is on one version at a time.
CREATE TABLE module_label (
    tenant   TEXT    NOT NULL,
    name     TEXT    NOT NULL,
    label    TEXT    NOT NULL,
    version  INTEGER NOT NULL,
    PRIMARY KEY (tenant, name, label)
);

WITH RECURSIVE split(tenant, name, version, position, item, rest) AS (
    SELECT tenant, name, version, 0, '', labels || ',' FROM module_version WHERE labels <> ''
    UNION ALL
    SELECT tenant, name, version, position + 1, trim(substr(rest, 1, instr(rest, ',') - 1)),
           substr(rest, instr(rest, ',') + 1)
    FROM split WHERE rest <> ''
)
INSERT INTO module_label (tenant, name, label, version)
    SELECT tenant, name, item, version FROM split
    WHERE position > 0 AND item <> '' AND true
    ON CONFLICT (tenant, name, label) DO NOTHING;

ALTER TABLE module_version DROP COLUMN labels;

-- The addresses of a MANUAL executor group, in the order given.
CREATE TABLE group_address (
    group_id  INTEGER NOT NULL,
    position  INTEGER NOT NULL,
    address   TEXT    NOT NULL,
    PRIMARY KEY (group_id, address)
);

WITH RECURSIVE split(group_id, position, item, rest) AS (
    SELECT id, 0, '', addresses || ',' FROM executor_group WHERE addresses <> ''
    UNION ALL
    SELECT group_id, position + 1, trim(substr(rest, 1, instr(rest, ',') - 1)),
           substr(rest, instr(rest, ',') + 1)
    FROM split WHERE rest <> ''
)
INSERT INTO group_address (group_id, position, address)
    SELECT group_id, position, item FROM split
    WHERE position > 0 AND item <> '' AND true
    ON CONFLICT (group_id, address) DO NOTHING;

ALTER TABLE executor_group DROP COLUMN addresses;
