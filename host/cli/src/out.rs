//! Standard output as a Unix tool uses it: when the reader goes away
//! (`cronbox runs | head -1`), the command ends quietly with status 0
//! instead of panicking; any other write error ends it with one line.
//!
//! Use `outln!` where `println!` would be used.

use std::io::Write;

/// Writes one line to standard output (see the module documentation).
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
    {
        write_failed(&error);
    }
}

/// Ends the process after a failed write to standard output: quietly when
/// the reader closed the pipe, with one line otherwise.
pub fn write_failed(error: &std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("error: cannot write to standard output: {error}");
    std::process::exit(1);
}

/// Whether `error` (or one of its causes) is a closed pipe on the reader's
/// side: the command's output is no longer wanted.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Panics print one line, without a backtrace: a user sees what went wrong
/// and where, not the program's insides.
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|text| (*text).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        let place = info
            .location()
            .map(|at| format!(" (at {}:{})", at.file(), at.line()))
            .unwrap_or_default();
        eprintln!("error: cronbox failed unexpectedly: {message}{place}; please report this");
    }));
}

/// `println!` that follows this module's rules.
macro_rules! outln {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
