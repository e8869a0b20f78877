//! Send windows: how fires spread over a second are grouped and when each
//! window is sent.

use super::*;

fn run_at(id: i64, scheduled_at_ms: i64) -> RunRow {
    let fire = NewRun {
        job_id: JobId(id),
        kind: cronbox_protocol::TriggerKind::Schedule,
        scheduled_at_ms,
        shard_index: 0,
        shard_total: 1,
        attempt: 0,
        param: String::new(),
        module_digest: crate::model::Digest::from_sha256(&[0; 32]),
    };
    written_run(RunId(id), "default", &fire, 0)
}

#[test]
fn fires_spread_over_a_second_are_sent_in_a_few_windows_ahead_of_each_instant() {
    let ahead = 300;
    let now = 0;
    // A fire every millisecond of a second, as jittered jobs make.
    let mut windows = std::collections::BTreeMap::<(i64, i64), usize>::new();
    for ms in 0..1000 {
        let scheduled_at = 60_000 + ms;
        let (index, send_at) = send_window(scheduled_at, ahead, now);
        let early = scheduled_at - send_at;
        assert!(
            (ahead..ahead + dispatch_window(ahead)).contains(&early),
            "a fire at {scheduled_at} sent {early} ms ahead"
        );
        *windows.entry((index, send_at)).or_default() += 1;
    }
    assert_eq!(windows.len(), 10, "a window is a third of `ahead`");
    assert_eq!(windows.values().sum::<usize>(), 1000, "every run sent once");

    // Nothing sent ahead: only runs due on the same millisecond share.
    assert_eq!(send_window(5, 0, now), send_window(5, 0, now));
    assert_ne!(send_window(5, 0, now).0, send_window(6, 0, now).0);
    assert_eq!(send_window(6, 0, now).1, 6, "sent at its instant");
}

#[test]
fn fires_whose_time_to_be_sent_has_come_go_together_at_once() {
    let (ahead, now) = (300, 60_000);
    // Seconds of late fires, as a pre-read that fell behind claims.
    // (The window of 60,300..60,400 is sent at 60,000: now.)
    let late: std::collections::BTreeSet<(i64, i64)> = (55_000..60_400)
        .step_by(7)
        .map(|at| send_window(at, ahead, now))
        .collect();
    assert_eq!(late.into_iter().collect::<Vec<_>>(), [(OVERDUE, now)]);
    // The first window still ahead keeps its timer.
    assert_eq!(send_window(60_400, ahead, now), (604, 60_100));
}

#[test]
fn the_batches_of_one_window_share_it_until_its_timer_takes_them() {
    let windows = OpenWindows::default();
    assert!(
        windows.add(7, Lease::Written, vec![run_at(1, 700)]),
        "opened"
    );
    assert!(
        !windows.add(7, Lease::Written, vec![run_at(2, 701), run_at(3, 799)]),
        "a second batch joins the open window"
    );
    assert!(
        windows.add(7, Lease::ToTake, vec![run_at(4, 700)]),
        "runs to take a lease on have a window of their own"
    );
    assert!(windows.add(8, Lease::Written, vec![run_at(5, 800)]));
    let taken: Vec<RunId> = windows
        .take(7, Lease::Written)
        .iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(taken, [RunId(1), RunId(2), RunId(3)]);
    assert!(windows.take(7, Lease::Written).is_empty(), "taken once");
    assert!(
        windows.add(7, Lease::Written, vec![run_at(6, 750)]),
        "a batch after the timer opens the window again"
    );
    assert_eq!(windows.take(7, Lease::Written).len(), 1);
    assert_eq!(windows.take(7, Lease::ToTake).len(), 1);
    assert_eq!(windows.take(8, Lease::Written).len(), 1);
}
