//! How long an admin holds the runs it writes and dispatches: the lease
//! lengths, one value per store (the operator's `--dispatch-lease`).
//!
//! A run is sent only by the admin whose lease on it is live; an admin
//! that dies leaves its runs to be taken over once their leases run out.
//! A shorter lease means a dead admin's fires are taken over sooner; it
//! must outlast a send (its timeout) and the write recording it.

use std::time::Duration;

/// The lease lengths of one admin (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leases {
    dispatch_ms: i64,
}

/// How long a dispatch holds its run unless the operator says otherwise.
pub const DEFAULT_DISPATCH_LEASE: Duration = Duration::from_secs(10);

/// How much longer than the dispatch lease a write's lease lasts past the
/// run's instant: a fire sent on time, or up to this late (the misfire
/// threshold), goes under the lease its write gave it with no second
/// write to take one.
const WRITE_GRACE_MS: i64 = 5_000;

impl Default for Leases {
    fn default() -> Leases {
        Leases::with_dispatch(DEFAULT_DISPATCH_LEASE)
    }
}

impl Leases {
    /// Leases whose dispatches hold their runs for `dispatch`.
    pub fn with_dispatch(dispatch: Duration) -> Leases {
        Leases {
            // Bounded well below i64::MAX: leases are added to instants.
            dispatch_ms: i64::try_from(dispatch.as_millis()).unwrap_or(i64::MAX / 4),
        }
    }

    /// How long a dispatch holds its run (the send's timeout, and time to
    /// record it).
    pub fn dispatch_ms(self) -> i64 {
        self.dispatch_ms
    }

    /// How long after its instant the admin that wrote a fire keeps the
    /// sole right to dispatch it: a dispatch's lease and the write grace.
    pub fn write_ms(self) -> i64 {
        self.dispatch_ms + WRITE_GRACE_MS
    }

    /// When the lease of the admin that writes a run scheduled at
    /// `scheduled_at_ms` at `written_at_ms` (its `created_at_ms`) runs out.
    pub fn write_until(self, scheduled_at_ms: i64, written_at_ms: i64) -> i64 {
        scheduled_at_ms.max(written_at_ms) + self.write_ms()
    }

    /// The least a run's write lease must have left for its dispatch to
    /// go out under it (or the lease is taken again first): what taking it
    /// would give, so that a send never has less time to be recorded than
    /// a taken lease allows. A fire sent on time has its whole write lease
    /// left.
    pub fn left_to_send_ms(self) -> i64 {
        self.dispatch_ms
    }

    /// A dispatch whose wait for a slot left its lease with less than this
    /// renews it before sending (or leaves the run to whoever took it).
    pub fn renew_below_ms(self) -> i64 {
        self.dispatch_ms / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_leases_are_those_the_admin_always_had() {
        let leases = Leases::default();
        assert_eq!(leases.dispatch_ms(), 10_000);
        assert_eq!(leases.write_until(1_000, 500), 16_000);
        assert_eq!(leases.write_until(1_000, 3_000), 18_000);
        assert_eq!(leases.renew_below_ms(), 5_000);
        let short = Leases::with_dispatch(Duration::from_secs(4));
        assert_eq!(short.write_ms(), 9_000);
        assert_eq!(short.left_to_send_ms(), 4_000);
    }
}
