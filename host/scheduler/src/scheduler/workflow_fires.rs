//! Workflows started by their schedule: each due fire claimed once (the
//! claim moves the next fire and writes the run in one transaction, so
//! admins racing for it start one run), what the fire does decided by
//! `crate::workflow::firing` — on time, late (the misfire policy), and
//! while runs are in progress (the overlap policy: start, skip, buffer
//! one, or cancel those in progress first); buffered fires started once
//! their workflow's runs have ended; a FIX_DELAY schedule's next fire
//! planned from the end of the run it waits for; backfills.

use cronbox_api::{Quota, WorkflowRunStatus};

use super::*;
use crate::store::Fire;
use crate::workflow::firing::{self, Overlap, Timetable};

impl Scheduler {
    /// `workflow`'s schedule as it fires: its rules with the dates of the
    /// tenant's calendars it names, its jitter seeded by its id.
    pub fn timetable_of(
        &self,
        workflow: &cronbox_api::Workflow,
    ) -> Result<Timetable, firing::InvalidSchedule> {
        let Some(schedule) = &workflow.definition.schedule else {
            return Err(firing::InvalidSchedule {
                field: "schedule".to_owned(),
                message: "no schedule".to_owned(),
            });
        };
        let calendars = schedule
            .rules
            .as_ref()
            .map(|rules| rules.calendars.as_slice())
            .unwrap_or_default();
        Ok(Timetable::parse(schedule, workflow.id)?
            .map_rules(|rules| self.with_calendars(rules, &workflow.tenant, calendars)))
    }

    /// Fires the workflows whose schedule is due, then starts the
    /// buffered fires whose workflow has no run in progress any more.
    pub(super) async fn fire_due_workflows(self: &Arc<Self>) -> Result<(), StoreError> {
        let now = self.now_ms();
        for workflow in self.store.due_workflows(now).await? {
            let (Some(planned), Some(schedule)) =
                (workflow.next_fire_at_ms, &workflow.definition.schedule)
            else {
                continue;
            };
            let timetable = match self.timetable_of(&workflow) {
                Ok(timetable) => timetable,
                Err(error) => {
                    // Checked when saved: damaged since. It stops firing,
                    // and says why.
                    tracing::error!(workflow = %workflow.name, %error, "a stored workflow schedule does not parse; it stops");
                    self.store
                        .claim_workflow_fire(&workflow, planned, None, Fire::Skip, now)
                        .await?;
                    continue;
                }
            };
            if now < planned + timetable.jitter(planned) {
                // Due, but its jitter holds it a moment longer.
                continue;
            }
            let (kind, mut next) = timetable.due_fire(schedule.misfire, planned, now);
            let input = schedule.input.as_deref().unwrap_or("{}");
            let waits = timetable.waits_for_runs();
            let start = |kind| match waits {
                true => Fire::StartThenWait(kind, input),
                false => Fire::Start(kind, input),
            };
            let mut fire = kind.map_or(Fire::Skip, start);
            if fire != Fire::Skip {
                let running = self.store.workflow_runs_in_progress(workflow.id).await?;
                let buffered =
                    !running.is_empty() && self.store.workflow_fire_buffered(workflow.id).await?;
                match firing::overlap(schedule.overlap, running.len(), buffered) {
                    Overlap::Start => {}
                    Overlap::Skip => {
                        tracing::info!(workflow = %workflow.name, "a fire skipped: a run is in progress");
                        fire = Fire::Skip;
                    }
                    Overlap::Buffer => fire = Fire::Buffer,
                    Overlap::CancelThenStart => {
                        for id in running {
                            self.stop_workflow(
                                id,
                                WorkflowRunStatus::Cancelled,
                                "cancelled by its workflow's next scheduled fire",
                            )
                            .await?;
                        }
                    }
                }
            }
            if matches!(fire, Fire::Start(..) | Fire::StartThenWait(..))
                && let Err(over) = self
                    .quotas
                    .check_one_more(&self.store, &workflow.tenant, Quota::WorkflowRuns, now)
                    .await?
            {
                tracing::warn!(workflow = %workflow.name, %over, "a fire skipped");
                fire = Fire::Skip;
            }
            // A FIX_DELAY fire that starts no run now counts its delay
            // from now (a buffered one waits for the run it starts).
            if waits && matches!(fire, Fire::Skip) {
                next = next.or_else(|| timetable.after_run(now));
            }
            if let Some(Some(run)) = self
                .store
                .claim_workflow_fire(&workflow, planned, next, fire, now)
                .await?
            {
                self.advance_workflow(run).await?;
            }
        }
        for workflow in self.store.workflows_with_a_fire_to_start().await? {
            let Some(schedule) = &workflow.definition.schedule else {
                continue;
            };
            let input = schedule.input.as_deref().unwrap_or("{}");
            let waits = self
                .timetable_of(&workflow)
                .is_ok_and(|table| table.waits_for_runs());
            if let Some(run) = self
                .store
                .start_buffered_fire(&workflow, input, waits, self.now_ms())
                .await?
            {
                self.advance_workflow(run).await?;
            }
        }
        for (workflow, awaited, ended_ms) in self.store.workflows_done_waiting().await? {
            let next = self
                .timetable_of(&workflow)
                .ok()
                .and_then(|table| table.after_run(ended_ms.max(now)));
            self.store
                .resume_after_run(workflow.id, awaited, next)
                .await?;
        }
        Ok(())
    }

    /// Starts a run (kind `backfill`) of `workflow` for each instant of
    /// its schedule in `(from_ms, to_ms]` that no backfill ran before.
    pub async fn backfill_workflow(
        self: &Arc<Self>,
        workflow: &cronbox_api::Workflow,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<WorkflowBackfillOutcome, StoreError> {
        let Some(schedule) = &workflow.definition.schedule else {
            return Ok(WorkflowBackfillOutcome::NoSchedule);
        };
        let Ok(timetable) = self.timetable_of(workflow) else {
            return Ok(WorkflowBackfillOutcome::NoSchedule);
        };
        if timetable.waits_for_runs() {
            return Ok(WorkflowBackfillOutcome::FollowsRuns);
        }
        let max = cronbox_api::WorkflowSpec::MAX_BACKFILL_RUNS;
        let fires = match timetable.fires_between(from_ms, to_ms, max) {
            Ok(fires) => fires,
            Err(_) => return Ok(WorkflowBackfillOutcome::TooMany(max)),
        };
        let now = self.now_ms();
        if let Err(over) = self
            .quotas
            .check_more(
                &self.store,
                &workflow.tenant,
                Quota::WorkflowRuns,
                fires.len() as u64,
                now,
            )
            .await?
        {
            return Ok(WorkflowBackfillOutcome::OverQuota(over));
        }
        let input = schedule.input.as_deref().unwrap_or("{}");
        let started = self
            .store
            .backfill_workflow(workflow, &fires, input, now)
            .await?;
        for run in &started {
            self.advance_workflow(*run).await?;
        }
        Ok(WorkflowBackfillOutcome::Started(
            cronbox_api::WorkflowBackfill {
                planned: fires.len() as i64,
                already_run: (fires.len() - started.len()) as i64,
                started,
            },
        ))
    }
}

/// What a workflow backfill did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkflowBackfillOutcome {
    Started(cronbox_api::WorkflowBackfill),
    /// The workflow has no schedule to backfill.
    NoSchedule,
    /// FIX_DELAY: its fires follow its runs' ends; there are none to run
    /// again.
    FollowsRuns,
    /// More instants in the range than one backfill starts (this many).
    TooMany(usize),
    /// Its runs would take the tenant past its workflow runs quota.
    OverQuota(crate::quotas::QuotaExceeded),
}
