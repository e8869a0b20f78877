//! The cronbox admin: it decides what runs where and when, and records what
//! happened.
//!
//! - `schedule` — cron (Quartz and Unix dialects) in IANA time zones with a
//!   written DST rule, fixed rate, fixed delay, one-shot, none;
//! - `routing` — xxl-job's ten route strategies.
//!
//! The admin never links wasmtime: it talks to executors over HTTP.

pub mod routing;
pub mod schedule;
