//! What a run sees of its job's durable state when it starts.
//!
//! The admin reads a run's state snapshot (values, and the revision of
//! each key: the run whose commit wrote it) when it builds the run
//! command; a run of the same job that ended here may have changed the
//! state since, its commit at the admin still on its way. So the changes
//! of the job's recent successful runs here are laid over the snapshot,
//! each key only where the snapshot (or the view being built) is at the
//! very revision that run's change was based on: the snapshot is then
//! older than that change, whenever the run ended. A key at the run's own
//! revision already holds the change; a key at any other revision was
//! written since by a commit that saw the change (every commit is checked
//! against the revisions its run was based on), so the snapshot wins.
//! Runs on one executor one after another thus never conflict, however
//! late their results reach the admin.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cronbox_protocol::{ABSENT_REVISION, RunCommand, StateChanges, StateRevision};
use cronbox_runtime::RunReport;

/// A run's view of its job's state when it starts: values, and the
/// revision each key is at in that view.
pub(super) struct StartState {
    pub(super) values: Arc<HashMap<String, String>>,
    pub(super) revisions: HashMap<String, StateRevision>,
}

impl StartState {
    /// The command's snapshot as it came.
    pub(super) fn of(command: &RunCommand) -> StartState {
        StartState {
            values: Arc::new(command.state.clone()),
            revisions: command.state_revisions.clone(),
        }
    }

    /// The revisions the run's reads and writes were based on: what the
    /// admin checks before committing its changes.
    pub(super) fn base_of(&self, report: &RunReport) -> BTreeMap<String, StateRevision> {
        if report.state_changes.is_empty() {
            return BTreeMap::new();
        }
        report
            .state_reads
            .iter()
            .chain(report.state_changes.keys())
            .map(|key| (key.clone(), self.revision(key)))
            .collect()
    }

    fn revision(&self, key: &str) -> StateRevision {
        self.revisions.get(key).copied().unwrap_or(ABSENT_REVISION)
    }
}

/// A successful run's changes, and the revisions they were based on.
struct Change {
    ended: Instant,
    run_id: u64,
    changes: StateChanges,
    base: BTreeMap<String, StateRevision>,
}

/// The state changes of one job's recent successful runs here, oldest
/// first: at most [`RecentChanges::MAX`], none older than
/// [`RecentChanges::KEPT_FOR`].
#[derive(Default)]
pub(super) struct RecentChanges(VecDeque<Change>);

impl RecentChanges {
    /// How long a change set is kept for later snapshots: far longer than
    /// a result takes to reach the admin.
    const KEPT_FOR: Duration = Duration::from_secs(60);
    const MAX: usize = 64;

    /// Remembers what the run `run_id` changed, from the view `start` it
    /// started with.
    pub(super) fn remember(&mut self, run_id: u64, report: &RunReport, start: &StartState) {
        let now = Instant::now();
        self.0.push_back(Change {
            ended: now,
            run_id,
            changes: report.state_changes.clone(),
            base: start.base_of(report),
        });
        while self.0.len() > Self::MAX
            || self
                .0
                .front()
                .is_some_and(|change| now.duration_since(change.ended) > Self::KEPT_FOR)
        {
            self.0.pop_front();
        }
    }

    /// `command`'s snapshot with the changes it does not hold yet.
    pub(super) fn view(&self, command: &RunCommand) -> StartState {
        let mut values = command.state.clone();
        let mut revisions = command.state_revisions.clone();
        for change in &self.0 {
            for (key, value) in &change.changes {
                let based_on = change.base.get(key).copied().unwrap_or(ABSENT_REVISION);
                let at = revisions.get(key).copied().unwrap_or(ABSENT_REVISION);
                if at != based_on {
                    continue; // held already, or written since by a commit that saw it
                }
                match value {
                    Some(value) => {
                        values.insert(key.clone(), value.clone());
                        revisions.insert(key.clone(), change.run_id as StateRevision);
                    }
                    None => {
                        values.remove(key);
                        revisions.remove(key);
                    }
                }
            }
        }
        StartState {
            values: Arc::new(values),
            revisions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(state: &[(&str, &str, StateRevision)]) -> RunCommand {
        let digest: cronbox_protocol::Digest = "a".repeat(64).parse().unwrap();
        let mut command = RunCommand::new(cronbox_protocol::Trigger::manual("", 0), digest);
        for (key, value, revision) in state {
            command.state.insert((*key).to_owned(), (*value).to_owned());
            command.state_revisions.insert((*key).to_owned(), *revision);
        }
        command
    }

    /// A run that read and wrote `count`, writing `value`.
    fn counted(value: &str) -> RunReport {
        let mut report = RunReport::unstarted(
            cronbox_protocol::Outcome::Success {
                message: String::new(),
            },
            &"a".repeat(64).parse().unwrap(),
        );
        report
            .state_changes
            .insert("count".to_owned(), Some(value.to_owned()));
        report.state_reads.insert("count".to_owned());
        report
    }

    #[test]
    fn a_change_whose_commit_the_snapshot_missed_is_laid_over_it_whenever_it_ended() {
        // Run 2 started from revision 0 (absent) and wrote count=1; the
        // next command's snapshot was read before its commit, and came
        // after it ended here.
        let mut recent = RecentChanges::default();
        let first = command(&[]);
        recent.remember(2, &counted("1"), &StartState::of(&first));
        let next = recent.view(&command(&[]));
        assert_eq!(next.values.get("count").map(String::as_str), Some("1"));
        assert_eq!(next.revisions.get("count"), Some(&2));

        // A run from that view bases its change on revision 2, so a
        // snapshot at revision 2 takes its change too.
        recent.remember(5, &counted("2"), &next);
        let after = recent.view(&command(&[("count", "1", 2)]));
        assert_eq!(after.values.get("count").map(String::as_str), Some("2"));
        assert_eq!(after.revisions.get("count"), Some(&5));
    }

    #[test]
    fn a_snapshot_holding_the_change_or_a_later_commit_wins() {
        let mut recent = RecentChanges::default();
        recent.remember(2, &counted("1"), &StartState::of(&command(&[])));
        // Committed already: the snapshot is at run 2's revision.
        let held = recent.view(&command(&[("count", "1", 2)]));
        assert_eq!(held.revisions.get("count"), Some(&2));
        // Written since by run 9 elsewhere, which saw run 2's change.
        let later = recent.view(&command(&[("count", "7", 9)]));
        assert_eq!(later.values.get("count").map(String::as_str), Some("7"));
        assert_eq!(later.revisions.get("count"), Some(&9));
    }
}
