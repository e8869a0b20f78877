-- Module content no job, version or open run refers to is collected by
-- housekeeping; these indexes make "does anything refer to it" a lookup.
CREATE INDEX job_by_module ON job (module_digest);
CREATE INDEX module_version_by_digest ON module_version (digest);
