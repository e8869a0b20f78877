//! How many of a test binary's tests run at a time.
//!
//! libtest runs as many tests at once as the machine has cores, whatever
//! they do. Most end-to-end tests spend their time waiting on real time —
//! a fire's instant, a process starting, a run ending — with the cores
//! idle: the binaries made of such tests say so with [`tests_at_a_time!`]
//! and run more of them together. `RUST_TEST_THREADS` and
//! `--test-threads` still decide when given.
//!
//! A binary made of several groups of such tests (a module each) runs
//! them side by side, each group [`TestGroup::turn`] by turn at its own
//! pace, so that one group's waits overlap another's instead of following
//! them.

use std::sync::{Condvar, Mutex, PoisonError};

/// Runs this test binary's tests `$threads` at a time, unless
/// `RUST_TEST_THREADS` is set (`--test-threads` wins over both). For
/// binaries whose tests wait rather than compute; one whose tests load the
/// machine keeps libtest's default.
///
/// The variable is set by a function the loader calls before `main` (an
/// ELF initializer, where libtest's own `main` will read it).
#[macro_export]
macro_rules! tests_at_a_time {
    ($threads:literal) => {
        #[used]
        #[unsafe(link_section = ".init_array")]
        static TESTS_AT_A_TIME: extern "C" fn() = {
            extern "C" fn tests_at_a_time() {
                if std::env::var_os("RUST_TEST_THREADS").is_none() {
                    // SAFETY: initializers run before `main`, while the
                    // process has a single thread: nothing reads the
                    // environment concurrently.
                    unsafe { std::env::set_var("RUST_TEST_THREADS", stringify!($threads)) };
                }
            }
            tests_at_a_time
        };
    };
}

/// Tests that run at most `max` at a time, beside the binary's other
/// groups. Each test of the group takes its [`turn`](TestGroup::turn)
/// first; the binary runs enough tests at a time ([`tests_at_a_time!`])
/// for every group's to be under way together.
#[derive(Debug)]
pub struct TestGroup {
    max: usize,
    running: Mutex<usize>,
    ended: Condvar,
}

impl TestGroup {
    /// A group running at most `max` of its tests at a time.
    pub const fn new(max: usize) -> TestGroup {
        TestGroup {
            max,
            running: Mutex::new(0),
            ended: Condvar::new(),
        }
    }

    /// Waits until fewer than `max` of the group's tests run; the calling
    /// test runs as one of them until the returned turn is dropped (at its
    /// end, passed or failed).
    pub fn turn(&'static self) -> Turn {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let mut running = self
            .ended
            .wait_while(running, |running| *running >= self.max)
            .unwrap_or_else(PoisonError::into_inner);
        *running += 1;
        Turn(self)
    }
}

/// A test's turn in its [`TestGroup`], given up when dropped.
#[derive(Debug)]
#[must_use = "the turn ends when dropped"]
pub struct Turn(&'static TestGroup);

impl Drop for Turn {
    fn drop(&mut self) {
        *self
            .0
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.ended.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_full_group_lets_a_test_in_when_one_ends() {
        static GROUP: TestGroup = TestGroup::new(2);
        let first = GROUP.turn();
        let _second = GROUP.turn();
        let (turned, turns) = mpsc::channel();
        let third = std::thread::spawn(move || {
            let _turn = GROUP.turn();
            turned.send(()).unwrap();
        });
        // A correct group never lets it in here; one that did not count
        // would within this time.
        assert_eq!(
            turns.recv_timeout(Duration::from_millis(200)),
            Err(mpsc::RecvTimeoutError::Timeout),
            "a third test ran beside two in a group of two"
        );
        drop(first);
        turns.recv().unwrap();
        third.join().unwrap();
    }
}
