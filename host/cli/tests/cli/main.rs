//! The `cronbox` binary as a user runs it, in one test binary: the admin
//! and executors end to end, the console in a browser, `cronbox up`, the
//! scheduling semantics, TLS between machines, `cronbox run`, the CLI as
//! a Unix tool, the documents' commands. Each module says what it covers.
//!
//! These tests wait far more than they compute (a fire's instant, a
//! process starting, a lease running out), so they share one binary and
//! run side by side: each module is a [`TestGroup`](cronbox_tests::TestGroup)
//! whose tests take their turn at the module's own pace, and one group's
//! waits overlap another's instead of following them. The modules of a
//! few quick tests run freely. The tests that load the machine on purpose
//! (`heavy`, `scaffold`, `hostile_guests`) are binaries of their
//! own, so that their load never skews these tests' timing, nor theirs.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

// Enough at once for every group's tests to be under way together: a test
// waiting for its group's turn holds one of these threads.
cronbox_tests::tests_at_a_time!(64);

#[path = "../support/mod.rs"]
mod support;

mod admin;
mod console;
mod deploy;
mod docs;
mod executor;
mod kubernetes;
mod run;
mod semantics;
mod tls;
mod unix_tool;
mod up;
