//! The tests that keep the cores busy, side by side in one binary: the
//! cluster on PostgreSQL firing hundreds of jobs a second (`cluster`),
//! whose load is what it measures; the Python and JavaScript jobs
//! (`languages`), whose interpreters the executor compiles in a child
//! process at a lower priority (niceness 10); and the API's contract
//! checked by schemathesis (`api_contract`), its passes at that priority
//! too. The compiles and the passes take the cores the firing leaves
//! idle and yield them to it, as compiles yield them to every run in
//! production. `cluster` and `languages` each go at their own pace (a
//! [`TestGroup`](cronbox_tests::TestGroup)); the contract's one test runs
//! beside them. The other tests that load the machine (`scaffold`'s
//! builds, `hostile_guests`) do it at full priority and are binaries of
//! their own; cargo runs a package's test
//! binaries in the order of their names, so `scaffold`'s Python and
//! JavaScript projects come after this binary and find the interpreters'
//! functions compiled (on a fresh machine, 20 s of it done once).
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

// Enough at once for every group's tests to be under way together: a test
// waiting for its group's turn holds one of these threads.
cronbox_tests::tests_at_a_time!(16);

#[path = "../support/mod.rs"]
mod support;

mod api_contract;
mod cluster;
mod languages;
