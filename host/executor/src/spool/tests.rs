//! The spool's tests: segments on disk, acknowledgements, cut results.

use super::*;
use cronbox_protocol::Outcome;

fn result(run_id: u64) -> RunResult {
    RunResult {
        run_id,
        job_id: 1,
        scheduled_at_ms: None,
        outcome: Outcome::Success {
            message: format!("run {run_id}"),
        },
        code: 200,
        started_at_ms: 1,
        duration_ms: 1,
        fuel_consumed: None,
        peak_memory_bytes: 0,
        module_digest: cronbox_protocol::Digest::from_sha256(&[0xd; 32]),
        log: Vec::new(),
        log_truncated: false,
        state_changes: Default::default(),
        traceparent: None,
        state_base: Default::default(),
        executor: "http://e".into(),
        receipt: String::new(),
    }
}

/// The run ids the next batch would hold (taken, then released).
fn run_ids(spool: &Spool) -> Vec<u64> {
    let ids: Vec<u64> = spool.next_batch(100).iter().map(|r| r.run_id).collect();
    spool.release(&ids);
    ids
}

#[test]
fn batches_on_their_way_hold_different_results_each_acknowledged_alone() -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let spool = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    for run_id in 1..=7 {
        spool.submit(&result(run_id));
    }
    let ids = |batch: Vec<RunResult>| batch.iter().map(|r| r.run_id).collect::<Vec<_>>();
    let first = ids(spool.next_batch(3));
    let second = ids(spool.next_batch(3));
    assert_eq!(
        (first.as_slice(), second.as_slice()),
        ([1, 2, 3].as_slice(), [4, 5, 6].as_slice())
    );
    // The second is answered first; the first fails and is sent again.
    spool.acknowledge(&second);
    spool.release(&first);
    assert_eq!(spool.pending(), 4);
    assert_eq!(ids(spool.next_batch(10)), [1, 2, 3, 7]);
    drop(spool);
    let reopened = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    assert_eq!(
        run_ids(&reopened),
        [1, 2, 3, 7],
        "a restart sends what was on its way, not what was acknowledged"
    );
    reopened.acknowledge(&[1, 2, 3, 7]);
    assert!(segment_files(dir.path()).is_empty());
    Ok(())
}

#[test]
fn a_reopened_spool_sends_only_what_was_not_acknowledged() -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let spool = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    for run_id in 1..=4 {
        spool.submit(&result(run_id));
    }
    spool.acknowledge(&[1, 2]);
    assert_eq!(run_ids(&spool), [3, 4]);
    drop(spool);

    // A crash in the middle of a write leaves a torn last line.
    let (_, segment) = segment_files(dir.path()).pop().expect("a segment");
    File::options()
        .append(true)
        .open(segment)?
        .write_all(b"{\"result\":{\"run_")?;

    let reopened = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    assert_eq!(
        run_ids(&reopened),
        [3, 4],
        "acknowledged runs are not resent"
    );
    assert_eq!(reopened.pending(), 2);
    reopened.submit(&result(5));
    reopened.acknowledge(&[3, 4, 5]);
    assert_eq!(reopened.pending(), 0);
    assert!(
        segment_files(dir.path()).is_empty(),
        "every segment is deleted once everything is acknowledged"
    );
    Ok(())
}

#[test]
fn segments_are_deleted_oldest_first_once_acknowledged() -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let spool = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    for run_id in 0..(SEGMENT_RESULTS as u64 * 2 + 1) {
        spool.submit(&result(run_id));
    }
    assert_eq!(segment_files(dir.path()).len(), 3);
    let first_segment_and_one: Vec<u64> = (0..=SEGMENT_RESULTS as u64).collect();
    spool.acknowledge(&first_segment_and_one);
    assert_eq!(
        segment_files(dir.path()).len(),
        2,
        "the first segment is fully acknowledged"
    );
    drop(spool);
    let reopened = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    assert_eq!(reopened.pending(), SEGMENT_RESULTS);
    assert_eq!(
        run_ids(&reopened).first().copied(),
        Some(SEGMENT_RESULTS as u64 + 1)
    );
    Ok(())
}

/// A result over the limit is cut to it: message shortened, the log's
/// tail dropped behind one marker line; batches stop at their byte
/// bound.
#[test]
fn big_results_are_cut_and_batches_bounded_in_bytes() -> std::io::Result<()> {
    let mut big = result(7);
    big.outcome = Outcome::Success {
        message: "m".repeat(1 << 20),
    };
    big.log = (0..100_000)
        .map(|i| LogLine {
            at_ms: 1,
            source: LogSource::Stdout,
            text: format!("line {i}"),
        })
        .collect();
    let (cut, size) = fit(&big, 64 << 10);
    assert!(size <= 64 << 10, "{size}");
    assert_eq!(size, serialized_size(&cut));
    let Outcome::Success { message } = &cut.outcome else {
        panic!("{:?}", cut.outcome)
    };
    assert!(message.ends_with("[cut]") && message.len() < 17 << 10);
    let marker = cut.log.last().unwrap();
    assert_eq!(marker.source, LogSource::Host);
    let dropped = 100_000 - (cut.log.len() - 1);
    assert!(
        marker
            .text
            .contains(&format!("{dropped} more lines were dropped")),
        "{}",
        marker.text
    );
    assert_eq!(cut.log[0].text, "line 0", "the head of the log is kept");
    let small = result(8);
    assert!(matches!(fit(&small, 64 << 10).0, Cow::Borrowed(_)));

    let dir = tempfile::tempdir()?;
    let spool = Spool::open(dir.path().to_path_buf(), 600 << 10)?;
    for run in 1..=4 {
        spool.submit(&RunResult {
            run_id: run,
            ..big.clone()
        });
    }
    // Each is cut to 600 KiB: one batch of 1 MiB holds one of them.
    assert_eq!(run_ids(&spool), [1]);
    Ok(())
}

/// A segment with a torn or garbage line is still read past it: the
/// bad line is skipped and counted, every good record replayed.
#[test]
fn a_bad_line_is_skipped_and_counted_not_the_end_of_the_segment() -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let spool = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    spool.submit(&result(1));
    let path = spool.path(spool.lock().segments.back().unwrap().id);
    drop(spool);
    // A torn record and bytes that are not even UTF-8, then a good one.
    let mut file = File::options().append(true).open(&path)?;
    file.write_all(b"{\"result\":{\"run_id\":2,\"job\n")?;
    file.write_all(b"\xff\xfe garbage\n")?;
    let good = serde_json::to_vec(&Record::Result(Cow::Owned(result(3))))?;
    file.write_all(&good)?;
    file.write_all(b"\n")?;
    drop(file);
    let reopened = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    assert_eq!(run_ids(&reopened), [1, 3]);
    assert_eq!(reopened.skipped_records(), 2);
    Ok(())
}

/// After a failed write the segment is closed: the next record goes to
/// a new segment, whole, instead of being glued to a torn line.
#[test]
fn a_write_error_starts_a_new_segment() -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let spool = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    spool.submit(&result(1));
    let first = {
        let mut state = spool.lock();
        let segment = state.segments.back_mut().unwrap();
        // A handle that cannot write: the next append fails.
        segment.file = Some(File::open(spool.path(segment.id))?);
        segment.id
    };
    spool.submit(&result(2));
    spool.submit(&result(3));
    let newest = spool.lock().segments.back().unwrap().id;
    assert!(newest > first, "a new segment after the failed write");
    drop(spool);
    let reopened = Spool::open(dir.path().to_path_buf(), 1 << 20)?;
    // Run 2's record was never written: only what reached a file
    // survives a restart, each record whole.
    assert_eq!(run_ids(&reopened), [1, 3]);
    assert_eq!(reopened.skipped_records(), 0);
    Ok(())
}
