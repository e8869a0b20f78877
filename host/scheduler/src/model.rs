//! The admin's domain types: the API crate's enumerations and ids, which
//! the store decodes strictly (an unknown stored value is a decode error
//! naming the column, never a silent default) and the API serializes under
//! the same names. They are defined once, in `cronbox-api`, so that the
//! admin, the CLI and the tests share them.

pub use cronbox_api::{
    AlarmState, BlockStrategy, DEFAULT_TENANT, Digest, JobId, MisfirePolicy, RouteStrategy, RunId,
    RunOutcome, RunStatus, ScheduleType, TriggerKind,
};
