//! The bodies of the API: the `cronbox-api` crate's types, which the
//! handlers answer and the OpenAPI document is derived from (the CLI and
//! the tests read the same types).

pub use cronbox_api::{
    Deleted, Executor, Group, GroupSpec, GroupTenants, JobKilled, JobStateBody, Ready, Report,
    RolledBack, RunKilled, RunPage, StateEdit, Tenant, TenantCreated, TenantModule, TenantSpec,
    TokenCreated, TokenRevoked, TokenSpec, TriggerRequest, Triggered, Uploaded, VersionChoice,
};
