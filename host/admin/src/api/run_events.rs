//! A run followed as it happens: `GET /api/v1/runs/{id}/events`, a stream
//! of server-sent events — `run` (the run, each time it changes), `log`
//! (new lines of its log, as `GET /api/v1/runs/{id}/log` pages them) and
//! `end` (the ended run, once every line was sent), after which the stream
//! ends. What the console's run page reads instead of polling.
//!
//! The stream is driven by the scheduler's run events (dispatched, ended:
//! see [`RunEvent`]); a running run's new lines are read from its
//! executor a few times a second, and the run is read again every
//! [`ROW_EVERY`] in case another admin ended it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream};
use tokio::sync::broadcast::{self, error::RecvError};

use super::*;
use crate::scheduler::RunEvent;

/// How often a running run's new log lines are read from its executor.
const LOG_EVERY: Duration = Duration::from_millis(250);

/// How often the run is read again while no event says it changed.
const ROW_EVERY: Duration = Duration::from_secs(2);

/// Log lines one `log` event holds at most.
const LOG_PAGE: usize = 1000;

/// Where a follower of `GET /api/v1/runs/{id}/events` starts.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct EventsQuery {
    /// The first log line to send (default 0): where a reconnecting follower was
    #[param(inline)]
    offset: Option<Bounded<0, { i64::MAX }>>,
}

/// The stream of run `id`'s events, its log from line `offset` (a
/// follower that reconnects says where it was).
pub(super) async fn run_events(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<RunId>,
    Params(query): Params<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Failure> {
    let offset = query.offset.map_or(0, Bounded::get) as usize;
    // Subscribed before the run is read: no change falls in between.
    let events = state.services.firing().run_events();
    let run = super::runs::visible_run(&state, &caller, id).await?;
    let mut ticks = tokio::time::interval(LOG_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut follow = Follow {
        state,
        run,
        events,
        offset,
        ticks,
        row_read_at: tokio::time::Instant::now(),
        pending: VecDeque::new(),
        done: false,
    };
    follow.push_run("run");
    let stream = stream::unfold(follow, |mut follow| async move {
        loop {
            if let Some(event) = follow.pending.pop_front() {
                return Some((Ok(event), follow));
            }
            if follow.done {
                return None;
            }
            follow.step().await;
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// One follower's view of its run.
struct Follow {
    state: Arc<AdminState>,
    run: RunRow,
    events: broadcast::Receiver<RunEvent>,
    /// The next log line to send.
    offset: usize,
    ticks: tokio::time::Interval,
    row_read_at: tokio::time::Instant,
    pending: VecDeque<Event>,
    done: bool,
}

impl Follow {
    fn is_open(&self) -> bool {
        matches!(self.run.status, RunStatus::Pending | RunStatus::Dispatched)
    }

    fn push(&mut self, name: &str, data: &impl Serialize) {
        match Event::default().event(name).json_data(data) {
            Ok(event) => self.pending.push_back(event),
            Err(error) => tracing::warn!(%error, "cannot write a run event"),
        }
    }

    /// Queues the run as it is now (its trace linked) as event `name`.
    fn push_run(&mut self, name: &str) {
        let mut run = self.run.clone();
        self.state.services.link_trace(&mut run);
        self.push(name, &run);
    }

    /// Waits for what changes next and queues its events.
    async fn step(&mut self) {
        if !self.is_open() {
            self.send_stored_log().await;
            self.push_run("end");
            self.done = true;
            return;
        }
        tokio::select! {
            received = self.events.recv() => match received {
                Ok(RunEvent::Dispatched { run_id, executor, at_ms, .. }) if run_id == self.run.id => {
                    // Written to the database a little later: shown now.
                    if self.run.status == RunStatus::Pending {
                        self.run.status = RunStatus::Dispatched;
                        self.run.executor = Some(executor);
                        self.run.dispatched_at_ms = Some(at_ms);
                        self.push_run("run");
                    }
                }
                Ok(RunEvent::Ended { run_id, .. }) if run_id == self.run.id => self.read_again().await,
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => self.read_again().await,
                // The admin is stopping.
                Err(RecvError::Closed) => self.done = true,
            },
            _ = self.ticks.tick() => {
                if self.run.status == RunStatus::Dispatched {
                    self.send_live_log().await;
                }
                if self.row_read_at.elapsed() >= ROW_EVERY {
                    self.read_again().await;
                }
            }
        }
    }

    /// Reads the run again; queues it if it moved on. A dispatch this
    /// admin saw but has not written yet is kept.
    async fn read_again(&mut self) {
        self.row_read_at = tokio::time::Instant::now();
        let read = match service::runs::find(self.state.services.store(), self.run.id).await {
            Ok(Some(run)) => self.state.services.firing().as_known(run),
            // Deleted meanwhile (retention): nothing more will come.
            Ok(None) => {
                self.done = true;
                return;
            }
            Err(error) => {
                tracing::debug!(%error, run = %self.run.id, "cannot read a followed run");
                return;
            }
        };
        let mut read = read;
        if read.status == RunStatus::Dispatched && read.started_at_ms.is_none() {
            // Its start, told by its executor, is written with its end.
            read.started_at_ms = self.run.started_at_ms;
        }
        let behind = read.status == RunStatus::Pending && self.run.status == RunStatus::Dispatched;
        if !behind && read != self.run {
            self.run = read;
            self.push_run("run");
        }
    }

    /// Queues the lines the executor has past the offset.
    async fn send_live_log(&mut self) {
        loop {
            let page = match self
                .state
                .services
                .firing()
                .live_log(&self.run, self.offset, LOG_PAGE)
                .await
            {
                Ok(page) => page,
                Err(error) => {
                    tracing::debug!(%error, run = %self.run.id, "live log unavailable");
                    return;
                }
            };
            // Its start, as the executor tells it: the run is shown running.
            if self.run.started_at_ms.is_none() && page.started_at_ms.is_some() {
                self.run.started_at_ms = page.started_at_ms;
                self.push_run("run");
            }
            let full = page.lines.len() == LOG_PAGE;
            if !self.queue_page(page) || !full {
                return;
            }
        }
    }

    /// Queues the stored log's lines past the offset (the run ended).
    async fn send_stored_log(&mut self) {
        let stored = match service::runs::stored_log(self.state.services.store(), self.run.id).await
        {
            Ok(stored) => stored,
            Err(error) => {
                tracing::debug!(%error, run = %self.run.id, "cannot read a followed run's log");
                return;
            }
        };
        loop {
            let page =
                crate::store::logs::stored_page(self.run.id, &stored, self.offset, LOG_PAGE, true);
            if !self.queue_page(page) {
                return;
            }
        }
    }

    /// Queues a `log` event of `page`'s lines (none: false).
    fn queue_page(&mut self, mut page: cronbox_protocol::LogResponse) -> bool {
        if page.lines.is_empty() {
            return false;
        }
        self.offset = page.next_offset;
        // The stream's `end` says when the log is whole.
        page.finished = false;
        self.push("log", &page);
        true
    }
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "get",
        "/api/v1/runs/{id}/events",
        "runs",
        "Follow a run: server-sent events `run` (the run, each time it changes), `log` (new lines, as a LogResponse) and `end` (the ended run, after its last lines); the stream then ends",
        None,
        "200",
        json!({
            "type": "object",
            "description": "One event of the stream",
            "required": ["event", "data"],
            "properties": {
                "event": { "type": "string", "enum": ["run", "log", "end"] },
                "data": {
                    "type": "string",
                    "description": "JSON: a Run (run, end) or a LogResponse (log)",
                    "contentMediaType": "application/json"
                }
            }
        }),
    )
    .with_media("text/event-stream")
    .with_query(parameters_of::<EventsQuery>());
    table.route(operation, VIEWER, run_events);
}
