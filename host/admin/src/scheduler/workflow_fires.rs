//! Workflows started by their schedule: each due fire claimed once (the
//! claim moves the next fire and writes the run in one transaction, so
//! admins racing for it start one run), what the fire does decided by
//! `crate::workflow::firing` — on time, late (the misfire policy), and
//! while runs are in progress (the overlap policy: start, skip, buffer
//! one, or cancel those in progress first) — and buffered fires started
//! once their workflow's runs have ended.

use cronbox_api::WorkflowRunStatus;

use super::*;
use crate::store::Fire;
use crate::workflow::firing::{self, Overlap, Timetable};

impl Scheduler {
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
            let timetable = match Timetable::parse(schedule) {
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
            let (kind, next) = timetable.due_fire(schedule.misfire, planned, now);
            let input = schedule.input.as_deref().unwrap_or("{}");
            let mut fire = kind.map_or(Fire::Skip, |kind| Fire::Start(kind, input));
            if let Fire::Start(..) = fire {
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
            if let Some(Some(run)) = self
                .store
                .claim_workflow_fire(&workflow, planned, next, fire, now)
                .await?
            {
                self.advance_workflow(run).await?;
            }
        }
        for workflow in self.store.workflows_with_a_fire_to_start().await? {
            let input = workflow
                .definition
                .schedule
                .as_ref()
                .and_then(|schedule| schedule.input.as_deref())
                .unwrap_or("{}");
            if let Some(run) = self
                .store
                .start_buffered_fire(&workflow, input, self.now_ms())
                .await?
            {
                self.advance_workflow(run).await?;
            }
        }
        Ok(())
    }
}
