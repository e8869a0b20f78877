//! A run's log as the run table keeps it: one JSON array per run whose
//! lines are `[at_ms, source, text]`, the source one word (`stdout`,
//! `stderr`, `host`, or the guest's level: `trace` ... `error`).
//!
//! The API's form of a line (`{"at_ms":..,"source":"guest","level":"info",
//! "text":..}`) stored a log of one 14-byte line in 81 bytes; this one in
//! 41, which matters at millions of runs a day. Logs stored in the API's form (runs
//! ended before this layout) still read.

use cronbox_protocol::{LogLevel, LogLine, LogSource};
use serde::{Deserialize, Serialize};

/// The source of a stored line, as one word.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredSource {
    Stdout,
    Stderr,
    Host,
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl From<LogSource> for StoredSource {
    fn from(source: LogSource) -> Self {
        match source {
            LogSource::Stdout => Self::Stdout,
            LogSource::Stderr => Self::Stderr,
            LogSource::Host => Self::Host,
            LogSource::Guest(LogLevel::Trace) => Self::Trace,
            LogSource::Guest(LogLevel::Debug) => Self::Debug,
            LogSource::Guest(LogLevel::Info) => Self::Info,
            LogSource::Guest(LogLevel::Warn) => Self::Warn,
            LogSource::Guest(LogLevel::Error) => Self::Error,
        }
    }
}

impl From<StoredSource> for LogSource {
    fn from(source: StoredSource) -> Self {
        match source {
            StoredSource::Stdout => Self::Stdout,
            StoredSource::Stderr => Self::Stderr,
            StoredSource::Host => Self::Host,
            StoredSource::Trace => Self::Guest(LogLevel::Trace),
            StoredSource::Debug => Self::Guest(LogLevel::Debug),
            StoredSource::Info => Self::Guest(LogLevel::Info),
            StoredSource::Warn => Self::Guest(LogLevel::Warn),
            StoredSource::Error => Self::Guest(LogLevel::Error),
        }
    }
}

/// One line to store: `[at_ms, source, text]`.
#[derive(Serialize)]
struct Compact<'a>(i64, StoredSource, &'a str);

impl<'a> From<&'a LogLine> for Compact<'a> {
    fn from(line: &'a LogLine) -> Self {
        Compact(line.at_ms, line.source.into(), &line.text)
    }
}

/// One stored line, in either layout.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Compact(i64, StoredSource, String),
    Api(LogLine),
}

impl From<Stored> for LogLine {
    fn from(stored: Stored) -> Self {
        match stored {
            Stored::Compact(at_ms, source, text) => LogLine {
                at_ms,
                source: source.into(),
                text,
            },
            Stored::Api(line) => line,
        }
    }
}

/// `lines` as the run table stores them.
pub fn encode(lines: &[LogLine]) -> String {
    let compact: Vec<Compact<'_>> = lines.iter().map(Compact::from).collect();
    serde_json::to_string(&compact).unwrap_or_else(|_| "[]".to_owned())
}

/// The bytes `line` takes in a stored log, its separating comma included.
pub fn stored_bytes(line: &LogLine) -> u64 {
    serde_json::to_vec(&Compact::from(line)).map_or(0, |bytes| bytes.len() as u64 + 1)
}

/// The page of a stored log from line `offset`, `limit` lines at most, as
/// the API answers it: finished once the run has `ended` and the page
/// reaches the log's end.
pub fn stored_page(
    run_id: crate::RunId,
    stored: &str,
    offset: usize,
    limit: usize,
    ended: bool,
) -> cronbox_protocol::LogResponse {
    let (lines, total) = page(stored, offset, limit);
    let next_offset = offset.min(total) + lines.len();
    cronbox_protocol::LogResponse {
        run_id: run_id.wire(),
        lines,
        next_offset,
        finished: ended && next_offset == total,
        started_at_ms: None,
    }
}

/// The lines `offset..offset + limit` of a stored log and how many lines
/// it has, in one pass that builds only the lines returned (the others are
/// skipped unparsed into values). A log that does not parse reads as empty.
pub fn page(stored: &str, offset: usize, limit: usize) -> (Vec<LogLine>, usize) {
    use serde::de::{DeserializeSeed, IgnoredAny, SeqAccess, Visitor};

    struct Page {
        offset: usize,
        limit: usize,
    }

    impl<'de> Visitor<'de> for Page {
        type Value = (Vec<LogLine>, usize);

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array of log lines")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut lines = Vec::new();
            let mut index = 0;
            loop {
                let wanted = index >= self.offset && index - self.offset < self.limit;
                let more = if wanted {
                    seq.next_element::<Stored>()?
                        .map(|line| lines.push(line.into()))
                        .is_some()
                } else {
                    seq.next_element::<IgnoredAny>()?.is_some()
                };
                if !more {
                    return Ok((lines, index));
                }
                index += 1;
            }
        }
    }

    impl<'de> DeserializeSeed<'de> for Page {
        type Value = (Vec<LogLine>, usize);

        fn deserialize<D: serde::Deserializer<'de>>(
            self,
            deserializer: D,
        ) -> Result<Self::Value, D::Error> {
            deserializer.deserialize_seq(self)
        }
    }

    let mut deserializer = serde_json::Deserializer::from_str(stored);
    Page { offset, limit }
        .deserialize(&mut deserializer)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines() -> Vec<LogLine> {
        let sources = [
            LogSource::Stdout,
            LogSource::Stderr,
            LogSource::Host,
            LogSource::Guest(LogLevel::Trace),
            LogSource::Guest(LogLevel::Debug),
            LogSource::Guest(LogLevel::Info),
            LogSource::Guest(LogLevel::Warn),
            LogSource::Guest(LogLevel::Error),
        ];
        (0..10)
            .map(|i| LogLine {
                at_ms: 1_795_653_585_000 + i,
                source: sources[i as usize % sources.len()],
                text: format!("line {i} \"quoted\" ünïcode"),
            })
            .collect()
    }

    #[test]
    fn a_stored_log_is_paged_in_one_pass() {
        let lines = lines();
        let stored = encode(&lines);
        let (page_of_four, total) = page(&stored, 3, 4);
        assert_eq!(total, 10);
        assert_eq!(page_of_four, lines[3..7]);
        assert_eq!(page(&stored, 0, 100), (lines.clone(), 10));
        assert_eq!(page(&stored, 8, 100), (lines[8..].to_vec(), 10));
        assert_eq!(page(&stored, 50, 10), (Vec::new(), 10));
        assert_eq!(page("", 0, 10), (Vec::new(), 0));
        assert_eq!(page("not json", 0, 10), (Vec::new(), 0));
        assert_eq!(page(r#"[[1,"shout","x"]]"#, 0, 10), (Vec::new(), 0));
    }

    #[test]
    fn a_line_is_stored_in_about_half_the_bytes_of_the_api_form() {
        let line = LogLine {
            at_ms: 1_795_653_585_004,
            source: LogSource::Guest(LogLevel::Info),
            text: "hello, cronbox".to_owned(),
        };
        let stored = encode(std::slice::from_ref(&line));
        assert_eq!(stored, r#"[[1795653585004,"info","hello, cronbox"]]"#);
        assert_eq!(stored_bytes(&line) as usize, stored.len() - 2 + 1);
        let api = serde_json::to_string(&[&line]).unwrap();
        assert!(stored.len() * 10 <= api.len() * 6, "{stored} against {api}");
    }

    #[test]
    fn logs_stored_in_the_api_form_still_read() {
        let lines = lines();
        let old = serde_json::to_string(&lines).unwrap();
        assert!(old.contains(r#""source":"guest""#));
        assert_eq!(page(&old, 2, 3), (lines[2..5].to_vec(), 10));
    }
}
