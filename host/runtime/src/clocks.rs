//! The clocks a guest sees: the host's wall and monotonic clocks rounded
//! down to [`CLOCK_RESOLUTION`], so that a guest cannot time the host (or
//! another tenant's work on the same cores) finely enough for cache-timing
//! side channels. A job is scheduled in whole milliseconds at best; it
//! needs nothing finer.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

/// What a guest can tell apart on either clock: one millisecond.
pub const CLOCK_RESOLUTION: Duration = Duration::from_millis(1);

/// `duration` rounded down to a whole [`CLOCK_RESOLUTION`].
fn coarsen(duration: Duration) -> Duration {
    let step = CLOCK_RESOLUTION.as_nanos();
    let nanos = duration.as_nanos() / step * step;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The wall clock, in whole milliseconds.
pub(crate) struct CoarseWallClock;

impl HostWallClock for CoarseWallClock {
    fn resolution(&self) -> Duration {
        CLOCK_RESOLUTION
    }

    fn now(&self) -> Duration {
        coarsen(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
        )
    }
}

/// A monotonic clock from the instance's creation, in whole milliseconds.
pub(crate) struct CoarseMonotonicClock {
    start: Instant,
}

impl CoarseMonotonicClock {
    pub(crate) fn new() -> Self {
        CoarseMonotonicClock {
            start: Instant::now(),
        }
    }
}

impl HostMonotonicClock for CoarseMonotonicClock {
    fn resolution(&self) -> u64 {
        u64::try_from(CLOCK_RESOLUTION.as_nanos()).unwrap_or(u64::MAX)
    }

    fn now(&self) -> u64 {
        u64::try_from(coarsen(self.start.elapsed()).as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_whole_milliseconds_and_never_go_back() {
        let wall = CoarseWallClock;
        let mono = CoarseMonotonicClock::new();
        let mut last = 0;
        for _ in 0..1_000 {
            assert_eq!(wall.now().as_nanos() % 1_000_000, 0);
            let now = mono.now();
            assert_eq!(now % 1_000_000, 0);
            assert!(now >= last);
            last = now;
        }
        assert_eq!(mono.resolution(), 1_000_000);
        assert_eq!(wall.resolution(), Duration::from_millis(1));
    }
}
