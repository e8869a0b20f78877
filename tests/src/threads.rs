//! How many of a test binary's tests run at a time.
//!
//! libtest runs as many tests at once as the machine has cores, whatever
//! they do. Most end-to-end tests spend their time waiting on real time —
//! a fire's instant, a process starting, a run ending — with the cores
//! idle: the binaries made of such tests say so with [`tests_at_a_time!`]
//! and run more of them together. `RUST_TEST_THREADS` and
//! `--test-threads` still decide when given.

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
