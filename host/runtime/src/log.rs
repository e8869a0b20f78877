//! A run's log: stdout, stderr and `context.log` lines in one ordered,
//! size-capped buffer that can be read by offset while the run goes on.
//!
//! Every kept line is charged its text plus [`LINE_OVERHEAD`] bytes against
//! the cap (what a line costs in memory and on the wire even when empty),
//! and at most [`MAX_LINES`] are kept, so a flood of empty lines is bounded
//! like a flood of long ones. Past the cap, lines are dropped and a single
//! host line marks the spot (updated with the final count when the run
//! ends). Writing never fails and never traps the guest.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context as TaskContext, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use cronbox_protocol::{LogLevel, LogLine, LogSource};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Longest line kept whole; longer output without a newline is split.
const MAX_LINE_BYTES: usize = 16 << 10;

/// What a kept line is charged beyond its text: its record in memory
/// (time, source, string header) and its JSON framing, rounded up.
pub const LINE_OVERHEAD: usize = 64;

/// Most lines one run's log keeps, whatever its byte cap.
pub const MAX_LINES: usize = 100_000;

/// The log of one run. Shared: the worker writes it, readers page through it.
#[derive(Debug, Default)]
pub struct RunLog {
    inner: Mutex<LogInner>,
}

#[derive(Debug, Default)]
struct LogInner {
    lines: Vec<LogLine>,
    cap_bytes: usize,
    /// Text plus [`LINE_OVERHEAD`] per line kept.
    charged_bytes: usize,
    dropped_lines: u64,
    dropped_bytes: u64,
    marker: Option<usize>,
    partial_stdout: Vec<u8>,
    partial_stderr: Vec<u8>,
    finished: bool,
    /// Secret values to mask in every line, longest first.
    masks: Vec<String>,
}

/// What a secret's value becomes in the log.
pub const MASK: &str = "********";

/// `text` with every occurrence of each of `masks` (longest first)
/// replaced by [`MASK`].
pub(crate) fn mask(text: &str, masks: &[String]) -> String {
    let mut text = text.to_owned();
    for secret in masks {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), MASK);
        }
    }
    text
}

/// `bytes` with every occurrence of each of `masks` replaced by [`MASK`].
fn mask_bytes(bytes: &[u8], masks: &[String]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for secret in masks {
        let needle = secret.as_bytes();
        let mut masked = Vec::with_capacity(out.len());
        let mut at = 0;
        while at < out.len() {
            if out[at..].starts_with(needle) {
                masked.extend_from_slice(MASK.as_bytes());
                at += needle.len();
            } else {
                masked.push(out[at]);
                at += 1;
            }
        }
        out = masked;
    }
    out
}

/// A page of log lines read from an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    /// The lines from the requested offset on.
    pub lines: Vec<LogLine>,
    /// The offset to ask for next (line count so far).
    pub next_offset: usize,
    /// True once the run has ended: no line will follow `next_offset`.
    pub finished: bool,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as i64)
        .unwrap_or(0)
}

impl RunLog {
    /// A log keeping at most `cap_bytes`, each line charged its text plus
    /// [`LINE_OVERHEAD`].
    pub fn with_cap(cap_bytes: usize) -> Self {
        RunLog {
            inner: Mutex::new(LogInner {
                cap_bytes,
                ..LogInner::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LogInner> {
        // A panic while holding the lock cannot leave the buffer inconsistent
        // in a way that matters to readers: keep serving it.
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn set_cap(&self, cap_bytes: usize) {
        self.lock().cap_bytes = cap_bytes;
    }

    /// The values this log masks.
    pub(crate) fn masks(&self) -> Vec<String> {
        self.lock().masks.clone()
    }

    /// Masks these values (the run's secrets) in every line from now on.
    pub(crate) fn set_masks(&self, secrets: impl IntoIterator<Item = String>) {
        let mut masks: Vec<String> = secrets
            .into_iter()
            .filter(|secret| !secret.is_empty())
            .collect();
        masks.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        masks.dedup();
        self.lock().masks = masks;
    }

    /// Appends a `context.log` line.
    pub(crate) fn guest(&self, level: LogLevel, text: String) {
        self.lock().push(LogSource::Guest(level), text);
    }

    /// Appends a line written by the host.
    pub(crate) fn host(&self, text: String) {
        self.lock().push(LogSource::Host, text);
    }

    fn write_stream(&self, source: LogSource, bytes: &[u8]) {
        self.lock().write_stream(source, bytes);
    }

    /// Flushes partial lines and marks the log finished.
    pub(crate) fn finish(&self) {
        let mut inner = self.lock();
        inner.flush_partial(LogSource::Stdout);
        inner.flush_partial(LogSource::Stderr);
        inner.finished = true;
        inner.update_marker();
    }

    /// Lines from `offset` on, at most `max_lines` of them.
    pub fn read(&self, offset: usize, max_lines: usize) -> LogPage {
        let inner = self.lock();
        let start = offset.min(inner.lines.len());
        let end = start.saturating_add(max_lines).min(inner.lines.len());
        LogPage {
            lines: inner.lines[start..end].to_vec(),
            next_offset: end,
            finished: inner.finished && end == inner.lines.len(),
        }
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<LogLine> {
        self.lock().lines.clone()
    }

    /// Whether lines were dropped because of the cap.
    pub fn is_truncated(&self) -> bool {
        self.lock().marker.is_some()
    }

    /// Bytes charged for the lines kept: their text plus [`LINE_OVERHEAD`]
    /// each (the cap bounds it, and so the log's memory).
    pub fn charged_bytes(&self) -> usize {
        self.lock().charged_bytes
    }

    /// A stdout/stderr stream for WASI that writes into the log of whatever
    /// run is current in `sink`.
    pub(crate) fn stream(sink: LogSink, source: LogSource) -> GuestOutput {
        GuestOutput { sink, source }
    }
}

impl LogInner {
    fn push(&mut self, source: LogSource, text: String) {
        let text = if self.masks.is_empty() {
            text
        } else {
            mask(&text, &self.masks)
        };
        let charge = text.len() + LINE_OVERHEAD;
        if self.charged_bytes + charge > self.cap_bytes || self.lines.len() >= MAX_LINES {
            self.dropped_lines += 1;
            self.dropped_bytes += text.len() as u64;
            if self.marker.is_none() {
                self.marker = Some(self.lines.len());
                self.lines.push(LogLine {
                    at_ms: now_ms(),
                    source: LogSource::Host,
                    text: String::new(),
                });
            }
            self.update_marker();
            return;
        }
        self.charged_bytes += charge;
        self.lines.push(LogLine {
            at_ms: now_ms(),
            source,
            text,
        });
    }

    fn update_marker(&mut self) {
        if let Some(index) = self.marker {
            self.lines[index].text = format!(
                "log truncated: the cap of {} bytes ({} per line plus its text) or {} lines was \
                 reached; {} more lines ({} bytes) were dropped",
                self.cap_bytes, LINE_OVERHEAD, MAX_LINES, self.dropped_lines, self.dropped_bytes
            );
        }
    }

    fn partial(&mut self, source: LogSource) -> &mut Vec<u8> {
        match source {
            LogSource::Stderr => &mut self.partial_stderr,
            _ => &mut self.partial_stdout,
        }
    }

    fn write_stream(&mut self, source: LogSource, mut bytes: &[u8]) {
        while let Some(newline) = bytes.iter().position(|&byte| byte == b'\n') {
            let (line, rest) = bytes.split_at(newline);
            let partial = self.partial(source);
            partial.extend_from_slice(line);
            let text = String::from_utf8_lossy(&std::mem::take(partial)).into_owned();
            self.push(source, text);
            bytes = &rest[1..];
        }
        let partial = self.partial(source);
        partial.extend_from_slice(bytes);
        if partial.len() >= MAX_LINE_BYTES {
            self.split_partial(source);
        }
    }

    /// Pushes a partial line that grew past [`MAX_LINE_BYTES`]. With
    /// secrets to mask, the partial is masked first and its last bytes —
    /// too few to hold a whole secret, perhaps the start of one — stay
    /// for the next write, so that no secret is cut in two unmasked.
    fn split_partial(&mut self, source: LogSource) {
        let keep = self
            .masks
            .iter()
            .map(|secret| secret.len().saturating_sub(1))
            .max()
            .unwrap_or(0);
        if keep == 0 {
            self.flush_partial(source);
            return;
        }
        let masks = std::mem::take(&mut self.masks);
        let masked = mask_bytes(self.partial(source), &masks);
        self.masks = masks;
        let split = masked.len().saturating_sub(keep);
        *self.partial(source) = masked[split..].to_vec();
        self.push(
            source,
            String::from_utf8_lossy(&masked[..split]).into_owned(),
        );
    }

    fn flush_partial(&mut self, source: LogSource) {
        let partial = std::mem::take(self.partial(source));
        if !partial.is_empty() {
            self.push(source, String::from_utf8_lossy(&partial).into_owned());
        }
    }
}

/// Where an instance's stdout and stderr go: the log of the run it is
/// serving now (a warm instance serves many runs).
#[derive(Debug, Clone, Default)]
pub(crate) struct LogSink {
    current: Arc<Mutex<Arc<RunLog>>>,
}

impl LogSink {
    pub(crate) fn switch_to(&self, log: Arc<RunLog>) {
        *self
            .current
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = log;
    }

    fn current(&self) -> Arc<RunLog> {
        self.current
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }
}

/// The guest's stdout or stderr: always ready, never full, never an error.
#[derive(Debug, Clone)]
pub(crate) struct GuestOutput {
    sink: LogSink,
    source: LogSource,
}

impl GuestOutput {
    fn write_bytes(&self, bytes: &[u8]) {
        self.sink.current().write_stream(self.source, bytes);
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

/// Room offered to the guest per write; the log drops what exceeds its cap.
const WRITE_BUDGET: usize = 64 << 10;

#[wasmtime_wasi::async_trait]
impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.write_bytes(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_BUDGET)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write_bytes(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_in_lines_and_across_split_writes() {
        let log = RunLog::with_cap(1 << 20);
        log.set_masks([
            "hunter2".to_owned(),
            "hunter2-long".to_owned(),
            String::new(),
        ]);
        log.write_stream(LogSource::Stdout, b"token=hunt");
        log.write_stream(LogSource::Stdout, b"er2 and hunter2-long\n");
        log.guest(LogLevel::Info, "guest says hunter2".into());
        // A line split at the length limit with a secret across the cut.
        let mut long = vec![b'x'; MAX_LINE_BYTES - 3];
        long.extend_from_slice(b"hunter2\n");
        log.write_stream(LogSource::Stderr, &long[..MAX_LINE_BYTES]);
        log.write_stream(LogSource::Stderr, &long[MAX_LINE_BYTES..]);
        log.finish();
        let lines = log.lines();
        assert_eq!(lines[0].text, "token=******** and ********");
        assert_eq!(lines[1].text, "guest says ********");
        let stderr: String = lines[2..].iter().map(|line| line.text.as_str()).collect();
        assert!(
            !stderr.contains("hunter"),
            "{}",
            &stderr[stderr.len() - 40..]
        );
        assert!(
            stderr.ends_with("x********"),
            "{}",
            &stderr[stderr.len() - 40..]
        );
    }

    #[test]
    fn splits_lines_across_writes_and_sources() {
        let log = RunLog::with_cap(1 << 10);
        log.write_stream(LogSource::Stdout, b"hel");
        log.write_stream(LogSource::Stderr, b"oops\n");
        log.write_stream(LogSource::Stdout, b"lo\nworld");
        log.guest(LogLevel::Info, "from log".into());
        log.finish();
        let texts: Vec<(LogSource, String)> = log
            .lines()
            .into_iter()
            .map(|l| (l.source, l.text))
            .collect();
        assert_eq!(
            texts,
            vec![
                (LogSource::Stderr, "oops".into()),
                (LogSource::Stdout, "hello".into()),
                (LogSource::Guest(LogLevel::Info), "from log".into()),
                (LogSource::Stdout, "world".into()),
            ]
        );
        assert!(!log.is_truncated());
    }

    #[test]
    fn cap_drops_lines_behind_one_marker() {
        let log = RunLog::with_cap(10 + 2 * LINE_OVERHEAD);
        for i in 0..5 {
            log.guest(LogLevel::Info, format!("line{i}"));
        }
        log.finish();
        let lines = log.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0].text, "line0");
        assert_eq!(lines[1].text, "line1");
        assert_eq!(lines[2].source, LogSource::Host);
        assert!(
            lines[2]
                .text
                .contains("3 more lines (15 bytes) were dropped"),
            "{}",
            lines[2].text
        );
        assert!(log.is_truncated());
        assert!(log.charged_bytes() <= 10 + 2 * LINE_OVERHEAD);
    }

    /// Empty lines cost their overhead: a flood of them fills the cap like
    /// any other output, and the line count is capped whatever the bytes.
    #[test]
    fn empty_lines_are_charged_and_counted() {
        let cap = 64 << 10;
        let log = RunLog::with_cap(cap);
        log.write_stream(LogSource::Stdout, &vec![b'\n'; 1_000_000]);
        for _ in 0..1_000 {
            log.guest(LogLevel::Info, String::new());
        }
        log.finish();
        let lines = log.lines();
        assert_eq!(lines.len(), cap / LINE_OVERHEAD + 1, "kept, and one marker");
        assert!(log.charged_bytes() <= cap);
        let marker = &lines[cap / LINE_OVERHEAD];
        assert!(
            marker
                .text
                .contains(&format!("{} more lines", 1_001_000 - cap / LINE_OVERHEAD)),
            "{}",
            marker.text
        );

        let huge = RunLog::with_cap(usize::MAX / 2);
        huge.write_stream(LogSource::Stdout, &vec![b'\n'; MAX_LINES + 10]);
        assert_eq!(
            huge.lines().len(),
            MAX_LINES + 1,
            "capped by count, and one marker"
        );
    }

    #[test]
    fn reads_by_offset() {
        let log = RunLog::with_cap(1 << 10);
        for i in 0..10 {
            log.guest(LogLevel::Debug, format!("{i}"));
        }
        let page = log.read(3, 4);
        assert_eq!(page.next_offset, 7);
        assert_eq!(page.lines[0].text, "3");
        assert!(!page.finished);
        log.finish();
        let rest = log.read(7, 100);
        assert_eq!(rest.lines.len(), 3);
        assert!(rest.finished);
    }
}
