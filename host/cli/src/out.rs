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

/// `text` with each control character (ESC, CR, LF, TAB, ...) written as
/// its Rust escape (`\u{1b}`, `\r`): what users and jobs wrote (names,
/// notes, messages, log lines) can then not move the cursor, rewrite the
/// rows around it or retitle the terminal. `keep_tabs` leaves TAB as it is
/// (log lines).
pub fn printable(text: &str, keep_tabs: bool) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| c.is_control() && !(keep_tabs && c == '\t');
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    std::borrow::Cow::Owned(shown)
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

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(printable("plain name", false), "plain name");
        assert_eq!(
            printable("a\u{1b}[2Jb\r\nc\td", false),
            "a\\u{1b}[2Jb\\r\\nc\\td"
        );
        assert_eq!(printable("a\tb\u{7}", true), "a\tb\\u{7}");
    }
}
