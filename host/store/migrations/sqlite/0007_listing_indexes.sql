-- A tenant's listings read one page through an index, never a scan of
-- every tenant's rows: runs newest first, jobs in id order.
CREATE INDEX run_by_tenant ON run (tenant, id);
CREATE INDEX job_by_tenant ON job (tenant, id);
