//! Results that must reach an admin: an append-only spool on disk, delivered
//! in batches by a background sender and forgotten only once an admin
//! acknowledged them.
//!
//! A result is appended to the current segment file before anyone is told
//! the run ended, so a crash (even SIGKILL) loses nothing: a restarted
//! executor replays the segments and sends what was not acknowledged. An
//! acknowledgement is appended as a record too, so a restart does not send
//! again what an admin already has. Segments are deleted oldest first, once
//! every result in them is acknowledged (so an acknowledgement never
//! outlives the segment holding its result). The admin treats a second
//! callback for a run as a no-op (idempotent by run id).
//!
//! No one result can stall the others: a result is cut to
//! `max_result_bytes` before it is spooled (its log shortened behind a
//! marker line), batches are bounded in bytes as well as in count, and when
//! every admin refuses a batch (400, 413, 422) its results are sent one by
//! one; one still refused alone is quarantined: replaced by a small failed
//! result that says so, and counted in `results_quarantined`.
//!
//! Up to [`CALLBACKS_IN_FLIGHT`] batches are on their way at once, each of
//! results no other holds, each acknowledged by its run ids when its answer
//! comes: an admin reads one batch's jobs while it writes another's ends.
//! One at a time, a 1,000-result callback took 215-350 ms at 6,000 runs/s
//! and the spool grew without end.
//!
//! One `write` per record and no file per run: at thousands of runs a
//! second, creating, renaming and deleting a file each was most of the
//! executor's system time. Segments are not fsynced: they survive process
//! crashes, not a machine crash; the admin's lost-run monitor covers the
//! latter.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cronbox_protocol::{CallbackBatch, LogLine, LogSource, Outcome, RunResult, admin_paths};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::admin::{AdminClient, AdminError};
use crate::metrics::Metrics;

const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A new segment is started after this many results.
const SEGMENT_RESULTS: usize = 4_096;
/// Segment file extension.
const SEGMENT_EXTENSION: &str = "spool";
/// Most bytes of results in one callback request (a single larger result
/// still goes alone).
const BATCH_BYTES: usize = 1 << 20;
/// Callback batches on their way to admins at once (one at a time after a
/// batch was refused or a delivery failed).
const CALLBACKS_IN_FLIGHT: usize = 3;
/// Longest outcome message kept in a result cut to size.
const MAX_MESSAGE_BYTES: usize = 16 << 10;

/// One line of a segment (borrowed when written, owned when read back).
/// Records live one at a time while a line is written or read, so the
/// size of the result variant costs nothing worth a box per result.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum Record<'a> {
    /// A run's result, to deliver.
    Result(Cow<'a, RunResult>),
    /// Run ids an admin acknowledged.
    Acked(Cow<'a, [u64]>),
}

#[derive(Debug)]
pub(crate) struct Spool {
    dir: PathBuf,
    /// Lines of the segments replayed at open that could not be read.
    skipped_records: usize,
    /// Largest serialized result spooled; larger ones are cut.
    max_result_bytes: usize,
    state: Mutex<State>,
    wake: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Segments oldest first; the last one is appended to.
    segments: VecDeque<Segment>,
    /// Results not yet acknowledged, in the order they were spooled, each
    /// with its serialized size.
    unsent: VecDeque<(RunResult, usize)>,
    /// The segment holding each unacknowledged result.
    segment_of: HashMap<u64, u64>,
    /// Run ids of the results in a batch on its way: no other batch takes
    /// them until it is answered.
    in_flight: HashSet<u64>,
    next_segment: u64,
}

#[derive(Debug)]
struct Segment {
    id: u64,
    /// Open only for the newest segment.
    file: Option<File>,
    results: usize,
    unacknowledged: usize,
}

impl Spool {
    /// Opens the spool in `dir`, replaying the segments a previous process
    /// left.
    pub(crate) fn open(dir: PathBuf, max_result_bytes: usize) -> std::io::Result<Arc<Self>> {
        std::fs::create_dir_all(&dir)?;
        let mut state = State::default();
        let mut replayed: Vec<(u64, RunResult)> = Vec::new();
        let mut acknowledged = std::collections::HashSet::new();
        let mut skipped = 0;
        for (id, path) in segment_files(&dir) {
            state.next_segment = id + 1;
            state.segments.push_back(Segment {
                id,
                file: None,
                results: 0,
                unacknowledged: 0,
            });
            let (records, unreadable) = read_records(&path);
            skipped += unreadable;
            for record in records {
                match record {
                    Record::Result(result) => replayed.push((id, result.into_owned())),
                    Record::Acked(run_ids) => acknowledged.extend(run_ids.iter().copied()),
                }
            }
        }
        replayed.retain(|(_, result)| !acknowledged.contains(&result.run_id));
        for (segment, result) in replayed {
            if let Some(held) = state.segments.iter_mut().find(|s| s.id == segment) {
                held.results += 1;
                held.unacknowledged += 1;
            }
            state.segment_of.insert(result.run_id, segment);
            let size = serialized_size(&result);
            state.unsent.push_back((result, size));
        }
        let spool = Spool {
            dir,
            skipped_records: skipped,
            max_result_bytes,
            state: Mutex::new(state),
            wake: Notify::new(),
        };
        spool.drop_acknowledged_segments(&mut spool.lock());
        Ok(Arc::new(spool))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn path(&self, segment: u64) -> PathBuf {
        self.dir.join(format!("{segment:020}.{SEGMENT_EXTENSION}"))
    }

    /// Appends `record` to the newest segment, starting one if needed.
    fn append(
        &self,
        state: &mut State,
        record: &Record<'_>,
        new_result: bool,
    ) -> std::io::Result<u64> {
        let starts_segment = match state.segments.back() {
            // Segments left by an earlier process are only read.
            Some(segment) => {
                segment.file.is_none() || (new_result && segment.results >= SEGMENT_RESULTS)
            }
            None => true,
        };
        if starts_segment {
            let id = state.next_segment;
            let file = File::options()
                .create_new(true)
                .append(true)
                .open(self.path(id))?;
            state.next_segment += 1;
            if let Some(previous) = state.segments.back_mut() {
                previous.file = None;
            }
            state.segments.push_back(Segment {
                id,
                file: Some(file),
                results: 0,
                unacknowledged: 0,
            });
        }
        let Some(segment) = state.segments.back_mut() else {
            return Err(std::io::Error::other("no spool segment"));
        };
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let Some(file) = &mut segment.file else {
            return Err(std::io::Error::other(
                "the newest spool segment is not open",
            ));
        };
        if let Err(error) = file.write_all(&line) {
            // Part of the line may be in the file: appending after it would
            // glue the next record to it. Close this segment; the next
            // append starts a new one (replay skips the broken line).
            segment.file = None;
            return Err(error);
        }
        if new_result {
            segment.results += 1;
            segment.unacknowledged += 1;
        }
        Ok(segment.id)
    }

    /// Records a result durably (cut to `max_result_bytes`) and wakes the
    /// sender.
    pub(crate) fn submit(&self, result: &RunResult) {
        let (result, size) = fit(result, self.max_result_bytes);
        let result = &*result;
        let mut state = self.lock();
        let record = Record::Result(Cow::Borrowed(result));
        match self.append(&mut state, &record, true) {
            Ok(segment) => {
                state.segment_of.insert(result.run_id, segment);
            }
            Err(error) => {
                tracing::error!(run_id = result.run_id, %error, "cannot spool a run result");
            }
        }
        state.unsent.push_back((result.clone(), size));
        drop(state);
        self.wake.notify_one();
    }

    /// Forgets the results of `run_ids`, which an admin acknowledged.
    fn acknowledge(&self, run_ids: &[u64]) {
        let mut state = self.lock();
        let acknowledged: HashSet<u64> = run_ids.iter().copied().collect();
        state
            .unsent
            .retain(|(result, _)| !acknowledged.contains(&result.run_id));
        for run_id in run_ids {
            state.in_flight.remove(run_id);
            if let Some(segment) = state.segment_of.remove(run_id)
                && let Some(held) = state.segments.iter_mut().find(|s| s.id == segment)
            {
                held.unacknowledged = held.unacknowledged.saturating_sub(1);
            }
        }
        if let Err(error) = self.append(&mut state, &Record::Acked(Cow::Borrowed(run_ids)), false) {
            // At worst the results are sent again after a restart.
            tracing::warn!(%error, "cannot record acknowledged results");
        }
        self.drop_acknowledged_segments(&mut state);
    }

    /// Puts the results of `run_ids` back to be sent again (their batch was
    /// not acknowledged).
    fn release(&self, run_ids: &[u64]) {
        let mut state = self.lock();
        for run_id in run_ids {
            state.in_flight.remove(run_id);
        }
    }

    /// Deletes the oldest segments while every result in them is
    /// acknowledged. When nothing at all is left unacknowledged, the newest
    /// goes too, so an idle executor's spool is empty.
    fn drop_acknowledged_segments(&self, state: &mut State) {
        let everything_acknowledged = state.unsent.is_empty();
        while let Some(oldest) = state.segments.front() {
            let newest = state.segments.len() == 1;
            if oldest.unacknowledged > 0 || (newest && !everything_acknowledged) {
                break;
            }
            let id = oldest.id;
            state.segments.pop_front();
            if let Err(error) = std::fs::remove_file(self.path(id))
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(segment = id, %error, "cannot delete a spool segment");
            }
        }
    }

    /// Lines of the replayed segments that could not be read (skipped).
    pub(crate) fn skipped_records(&self) -> usize {
        self.skipped_records
    }

    /// Results waiting to be acknowledged.
    pub(crate) fn pending(&self) -> usize {
        self.lock().unsent.len()
    }

    /// The oldest unacknowledged results no batch on its way holds: at
    /// most `limit`, and at most [`BATCH_BYTES`] of them unless the first
    /// alone is larger. They are on their way until [`Spool::acknowledge`]
    /// or [`Spool::release`].
    fn next_batch(&self, limit: usize) -> Vec<RunResult> {
        let mut state = self.lock();
        let mut bytes = 0;
        let mut batch = Vec::new();
        for (result, size) in &state.unsent {
            if batch.len() == limit || (!batch.is_empty() && bytes + size > BATCH_BYTES) {
                break;
            }
            if state.in_flight.contains(&result.run_id) {
                continue;
            }
            bytes += size;
            batch.push(result.clone());
        }
        for result in &batch {
            state.in_flight.insert(result.run_id);
        }
        batch
    }

    /// Gives up on the oldest result, which every admin refused on its
    /// own: it is acknowledged here and replaced by a small failed result
    /// saying why, so that the run still ends, visibly.
    fn quarantine(&self, refused: &RunResult, status: u16) {
        tracing::error!(
            run_id = refused.run_id,
            status,
            "every admin refused a run's result; it is replaced by a failure"
        );
        self.acknowledge(&[refused.run_id]);
        let message = format!(
            "the run's result was refused by every admin ({status}) and quarantined by the \
             executor; its log and state changes are lost"
        );
        if matches!(&refused.outcome, Outcome::Failed { message: said } if *said == message) {
            // The replacement itself was refused: nothing smaller to send.
            return;
        }
        let outcome = Outcome::Failed { message };
        self.submit(&RunResult {
            code: outcome.code(),
            outcome,
            log: Vec::new(),
            log_truncated: true,
            state_changes: Default::default(),
            state_base: Default::default(),
            ..refused.clone()
        });
    }

    /// Delivers spooled results until `stop` is cancelled and the spool is
    /// empty (or `stop` is cancelled and a delivery fails).
    pub(crate) async fn run_sender(
        self: Arc<Self>,
        admins: AdminClient,
        batch_size: usize,
        metrics: Arc<Metrics>,
        stop: CancellationToken,
    ) {
        let mut backoff = FIRST_BACKOFF;
        // After a refused batch, its results go one at a time.
        let mut singly = 0_usize;
        // After a failed delivery, one batch at a time until one arrives.
        let mut failing = false;
        let mut sending: JoinSet<(Vec<RunResult>, Result<(), AdminError>)> = JoinSet::new();
        loop {
            let most = if singly > 0 || failing {
                1
            } else {
                CALLBACKS_IN_FLIGHT
            };
            while sending.len() < most {
                let results = self.next_batch(if singly > 0 { 1 } else { batch_size });
                if results.is_empty() {
                    break;
                }
                let admins = admins.clone();
                sending.spawn(async move {
                    let body = CallbackBatch { results };
                    let sent = admins.post_any(admin_paths::CALLBACK, &body).await;
                    (body.results, sent)
                });
            }
            let Some(answered) = sending.join_next().await else {
                if stop.is_cancelled() {
                    return;
                }
                tokio::select! {
                    _ = self.wake.notified() => {}
                    _ = stop.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                // Let a burst of results gather into one batch.
                tokio::time::sleep(Duration::from_millis(2)).await;
                continue;
            };
            let Ok((results, sent)) = answered else {
                // A sending task cannot panic short of a bug; what it held
                // is sent again after a restart.
                continue;
            };
            let count = results.len();
            let run_ids: Vec<u64> = results.iter().map(|result| result.run_id).collect();
            match sent {
                Ok(()) => {
                    metrics.callbacks_delivered.inc_by(count as u64);
                    self.acknowledge(&run_ids);
                    singly = singly.saturating_sub(count);
                    backoff = FIRST_BACKOFF;
                    failing = false;
                }
                Err(AdminError::Refused { status, .. }) if count > 1 => {
                    tracing::warn!(
                        status,
                        count,
                        "a batch of results was refused; sending them one by one"
                    );
                    self.release(&run_ids);
                    singly = count;
                }
                Err(AdminError::Refused { status, .. }) => {
                    metrics.results_quarantined.inc();
                    self.quarantine(&results[0], status);
                    singly = singly.saturating_sub(1);
                }
                Err(error) => {
                    metrics.callback_failures.inc();
                    tracing::warn!(%error, pending = count, "callback failed; results stay spooled");
                    self.release(&run_ids);
                    failing = true;
                    if stop.is_cancelled() {
                        return;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.cancelled() => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

/// The bytes `result` takes in a callback body.
fn serialized_size(result: &RunResult) -> usize {
    serde_json::to_vec(result).map_or(usize::MAX, |bytes| bytes.len())
}

/// `result` cut to at most `max_bytes` serialized, with its size: the
/// outcome's message shortened, then the log's last lines dropped behind a
/// marker line; a result that still does not fit (its state changes) ends
/// as failed without them.
fn fit(result: &RunResult, max_bytes: usize) -> (Cow<'_, RunResult>, usize) {
    let size = serialized_size(result);
    if size <= max_bytes {
        return (Cow::Borrowed(result), size);
    }
    let mut cut = result.clone();
    shorten_message(&mut cut.outcome);
    let marker = |dropped: usize| LogLine {
        at_ms: result.log.last().map_or(0, |line| line.at_ms),
        source: LogSource::Host,
        text: format!(
            "log cut: the run's result was {size} bytes, over the executor's limit of \
             {max_bytes}; {dropped} more lines were dropped"
        ),
    };
    // Drop lines from the end until what is left, with the marker, fits.
    let mut over = serialized_size(&cut).saturating_sub(max_bytes);
    let mut dropped = 0;
    while over > 0 {
        let Some(line) = cut.log.pop() else { break };
        over = over.saturating_sub(serde_json::to_vec(&line).map_or(0, |bytes| bytes.len() + 1));
        dropped += 1;
    }
    if dropped > 0 {
        // Room for the marker itself.
        while serialized_size(&cut) + 300 > max_bytes {
            if cut.log.pop().is_none() {
                break;
            }
            dropped += 1;
        }
        cut.log.push(marker(dropped));
        cut.log_truncated = true;
    }
    let mut size = serialized_size(&cut);
    if size > max_bytes {
        cut.outcome = Outcome::Failed {
            message: format!(
                "the run's result is over the executor's limit of {max_bytes} bytes even without \
                 its log; its state changes were dropped"
            ),
        };
        cut.code = cut.outcome.code();
        cut.state_changes = Default::default();
        cut.state_base = Default::default();
        size = serialized_size(&cut);
    }
    (Cow::Owned(cut), size)
}

/// Shortens an outcome's free-text message to [`MAX_MESSAGE_BYTES`].
fn shorten_message(outcome: &mut Outcome) {
    let (Outcome::Success { message }
    | Outcome::Failed { message }
    | Outcome::Trap { message }
    | Outcome::Rejected { reason: message }) = outcome
    else {
        return;
    };
    if message.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str(" [cut]");
    }
}

/// The segment files in `dir`, oldest first.
fn segment_files(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == SEGMENT_EXTENSION))
                .filter_map(|path| {
                    let id = path.file_stem()?.to_str()?.parse().ok()?;
                    Some((id, path))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The records of one segment; a line that does not parse (the last one,
/// cut short by a crash) is reported and skipped.
/// The records of a segment file, and how many lines could not be read
/// (a torn write, garbage): those are skipped, the rest still read.
fn read_records(path: &Path) -> (Vec<Record<'static>>, usize) {
    let Ok(file) = File::open(path) else {
        return (Vec::new(), 0);
    };
    let mut skipped = 0;
    let mut records = Vec::new();
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = match line {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(path = %path.display(), %error, "spool segment unreadable past here");
                skipped += 1;
                break;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(&line) {
            Ok(record) => records.push(record),
            Err(error) => {
                tracing::error!(path = %path.display(), %error, "unreadable spool record skipped");
                skipped += 1;
            }
        }
    }
    (records, skipped)
}

#[cfg(test)]
mod tests;
