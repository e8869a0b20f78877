-- The tenants that may put jobs in an executor group (the operator grants
-- them); tenant '*' shares a group with every tenant. The operator's own
-- tenant, 'default', may use every group. The group named 'default' is
-- shared, and each tenant keeps the groups its jobs use today.
CREATE TABLE group_tenant (
    group_name  TEXT NOT NULL,
    tenant      TEXT NOT NULL,
    PRIMARY KEY (group_name, tenant)
);

INSERT INTO group_tenant (group_name, tenant) VALUES ('default', '*');

INSERT INTO group_tenant (group_name, tenant)
    SELECT DISTINCT group_name, tenant FROM job WHERE tenant <> 'default'
    ON CONFLICT (group_name, tenant) DO NOTHING;
