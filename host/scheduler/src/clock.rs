//! Time as the admin sees it: every scheduling decision reads the clock it
//! was given, and every timer waits on it, so tests can drive the admin
//! with a [`ManualClock`] in milliseconds of real time instead of waiting,
//! and admins whose clocks disagree can be simulated with an offset.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time (ms since the Unix epoch) and of timers
/// against it.
pub trait Clock: std::fmt::Debug + Send + Sync + 'static {
    /// Milliseconds since the epoch, now.
    fn now_ms(&self) -> i64;

    /// Resolves once [`Clock::now_ms`] has reached `at_ms` (at once if it
    /// has).
    fn sleep_until(&self, at_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The system's wall clock, shifted by a fixed offset (zero but in tests of
/// admins whose clocks disagree: `cronbox admin --clock-offset`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock {
    offset_ms: i64,
}

impl SystemClock {
    /// The system clock shifted by `offset_ms`.
    pub fn with_offset(offset_ms: i64) -> Self {
        SystemClock { offset_ms }
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|now| now.as_millis() as i64)
            .unwrap_or(0)
            + self.offset_ms
    }

    fn sleep_until(&self, at_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let wait = at_ms - self.now_ms();
        Box::pin(async move {
            if wait > 0 {
                tokio::time::sleep(Duration::from_millis(wait as u64)).await;
            }
        })
    }
}

/// A clock that moves only when told to: timers waiting on it go off when
/// [`ManualClock::advance`] or [`ManualClock::set`] passes their instant.
#[derive(Debug)]
pub struct ManualClock {
    now_ms: tokio::sync::watch::Sender<i64>,
}

impl ManualClock {
    /// A clock standing at `start_ms`.
    pub fn new(start_ms: i64) -> Arc<Self> {
        Arc::new(ManualClock {
            now_ms: tokio::sync::watch::Sender::new(start_ms),
        })
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.now_ms.send_modify(|now| *now += by.as_millis() as i64);
    }

    /// Sets the clock to `at_ms` (forward or back).
    pub fn set(&self, at_ms: i64) {
        self.now_ms.send_replace(at_ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        *self.now_ms.borrow()
    }

    fn sleep_until(&self, at_ms: i64) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let mut receiver = self.now_ms.subscribe();
        Box::pin(async move {
            // The sender lives as long as the clock, which outlives this.
            let _ = receiver.wait_for(|now| *now >= at_ms).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_clock_fires_timers_when_it_passes_them() {
        let clock = ManualClock::new(1_000);
        let timer = clock.sleep_until(5_000);
        tokio::pin!(timer);
        assert!(futures_poll_once(timer.as_mut()).await.is_none(), "not yet");
        clock.advance(Duration::from_secs(3));
        assert!(futures_poll_once(timer.as_mut()).await.is_none());
        clock.advance(Duration::from_secs(1));
        timer.await;
        assert_eq!(clock.now_ms(), 5_000);
    }

    /// Polls `future` once: its output if it was ready.
    async fn futures_poll_once<F: Future + Unpin>(future: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            output = future => Some(output),
            () = std::future::ready(()) => None,
        }
    }
}
