-- Lists that were comma-joined text become rows, one per element: the
-- database keeps each list free of duplicates, and queries can use them
-- (who names a job as a child, which version a label is on).

-- A job's children, in the order given.
CREATE TABLE job_child (
    job_id    BIGINT NOT NULL,
    position  BIGINT NOT NULL,
    child_id  BIGINT NOT NULL,
    PRIMARY KEY (job_id, child_id)
);
CREATE INDEX job_child_by_child ON job_child (child_id);

INSERT INTO job_child (job_id, position, child_id)
    SELECT job.id, item.position, trim(item.text)::BIGINT
    FROM job, unnest(string_to_array(job.children, ',')) WITH ORDINALITY AS item(text, position)
    WHERE trim(item.text) <> ''
    ON CONFLICT (job_id, child_id) DO NOTHING;

ALTER TABLE job DROP COLUMN children;

-- The labels of a module's versions: a label is on one version at a time.
CREATE TABLE module_label (
    tenant   TEXT   NOT NULL,
    name     TEXT   NOT NULL,
    label    TEXT   NOT NULL,
    version  BIGINT NOT NULL,
    PRIMARY KEY (tenant, name, label)
);

INSERT INTO module_label (tenant, name, label, version)
    SELECT v.tenant, v.name, trim(item.text), v.version
    FROM module_version v, unnest(string_to_array(v.labels, ',')) AS item(text)
    WHERE trim(item.text) <> ''
    ON CONFLICT (tenant, name, label) DO NOTHING;

ALTER TABLE module_version DROP COLUMN labels;

-- The addresses of a MANUAL executor group, in the order given.
CREATE TABLE group_address (
    group_id  BIGINT NOT NULL,
    position  BIGINT NOT NULL,
    address   TEXT   NOT NULL,
    PRIMARY KEY (group_id, address)
);

INSERT INTO group_address (group_id, position, address)
    SELECT g.id, item.position, trim(item.text)
    FROM executor_group g,
         unnest(string_to_array(g.addresses, ',')) WITH ORDINALITY AS item(text, position)
    WHERE trim(item.text) <> ''
    ON CONFLICT (group_id, address) DO NOTHING;

ALTER TABLE executor_group DROP COLUMN addresses;
