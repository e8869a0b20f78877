-- Quotas an operator set for a tenant (the others follow the admin's
-- defaults), and what each tenant used per UTC day of what is counted
-- per day.
CREATE TABLE tenant_quota (
    tenant       TEXT    NOT NULL,
    quota        TEXT    NOT NULL,
    quota_limit  BIGINT NOT NULL,
    PRIMARY KEY (tenant, quota)
);

CREATE TABLE tenant_usage (
    tenant     TEXT    NOT NULL,
    day        BIGINT NOT NULL,
    run_ms     BIGINT NOT NULL DEFAULT 0,
    log_bytes  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, day)
);
