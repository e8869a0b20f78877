//! Run commands to one executor sent together. Every dispatch hands its
//! command to its executor's queue; one task per executor sends what has
//! queued — up to [`RunBatch::MAX`] commands or [`BATCH_BYTES`] — as one
//! `run-batch` request (at most [`BATCHES_IN_FLIGHT`] at a time) and gives
//! each dispatch its own answer. Alone, a command goes at once in a batch
//! of one; in a burst, the fires due together share requests. A queue whose
//! executor has been quiet for [`IDLE_QUEUE`] ends. An executor that does
//! not know `run-batch` (404) is sent each command on its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use cronbox_protocol::{RunAnswer, RunBatch, RunBatchResponse, RunResponse, executor_paths};
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::Scheduler;

/// Most bytes of commands in one batch (a larger command goes alone).
pub(super) const BATCH_BYTES: usize = 1 << 20;

/// Batch requests on their way to one executor at a time. With four (256
/// commands a round trip), an admin that had fallen behind at 10,000
/// runs/s sent no faster than the fires came, and never caught up
/// (BENCHMARKS.md's history, "Windows shared by claim batches").
pub(super) const BATCHES_IN_FLIGHT: usize = 16;

/// A queue with nothing to send for this long ends (its executor may be
/// gone); the next command starts another.
pub(super) const IDLE_QUEUE: Duration = Duration::from_secs(60);

/// What became of one command sent to an executor.
#[derive(Debug)]
pub(super) enum Answer {
    /// The executor's answer with status 200.
    Response(RunResponse),
    /// The executor refused the command with this status.
    Refused { status: u16, message: String },
    /// No answer: the request failed or the answer was not one.
    Failed(String),
}

/// A command waiting in an executor's queue: its JSON, and where its
/// answer goes.
#[derive(Debug)]
struct Queued {
    body: Bytes,
    reply: oneshot::Sender<Answer>,
}

/// The queues of commands, one per executor address.
#[derive(Debug, Default)]
pub(super) struct Batches {
    queues: std::sync::Mutex<HashMap<String, (u64, mpsc::UnboundedSender<Queued>)>>,
    next_queue: AtomicU64,
}

impl Scheduler {
    /// Sends one run command (as JSON) to the executor at `address`,
    /// batched with others on their way there.
    pub(super) async fn send_command(self: &Arc<Self>, address: &str, body: Bytes) -> Answer {
        let (reply, answer) = oneshot::channel();
        let mut queued = Queued {
            body: body.clone(),
            reply,
        };
        loop {
            let (id, queue) = self.queue_of(address);
            match queue.send(queued) {
                Ok(()) => break,
                // That queue just ended: forget it, take a new one.
                Err(mpsc::error::SendError(back)) => {
                    queued = back;
                    let mut queues = self.dispatcher.batches.queues.lock().expect("lock");
                    if queues.get(address).is_some_and(|(known, _)| *known == id) {
                        queues.remove(address);
                    }
                }
            }
        }
        match answer.await {
            Ok(answer) => answer,
            // The queue's task was stopped (the admin is stopping): send
            // it alone.
            Err(_) => self.send_alone(address, body).await,
        }
    }

    /// The queue of `address`, started if there is none.
    fn queue_of(self: &Arc<Self>, address: &str) -> (u64, mpsc::UnboundedSender<Queued>) {
        let mut queues = self.dispatcher.batches.queues.lock().expect("lock");
        if let Some((id, queue)) = queues.get(address) {
            return (*id, queue.clone());
        }
        let id = self
            .dispatcher
            .batches
            .next_queue
            .fetch_add(1, Ordering::Relaxed);
        let (queue, commands) = mpsc::unbounded_channel();
        queues.insert(address.to_owned(), (id, queue.clone()));
        let scheduler = self.clone();
        let address = address.to_owned();
        self.tasks
            .spawn(async move { scheduler.send_queued(address, id, commands).await });
        (id, queue)
    }

    /// The task of one executor's queue: sends what has queued, in batches,
    /// until the queue has been idle for [`IDLE_QUEUE`].
    async fn send_queued(
        self: Arc<Self>,
        address: String,
        id: u64,
        mut commands: mpsc::UnboundedReceiver<Queued>,
    ) {
        let in_flight = Arc::new(Semaphore::new(BATCHES_IN_FLIGHT));
        // A command that did not fit in the batch before: the next one's
        // first.
        let mut carried = None;
        loop {
            let first = match carried.take() {
                Some(first) => first,
                None => match tokio::time::timeout(IDLE_QUEUE, commands.recv()).await {
                    Ok(Some(first)) => first,
                    Ok(None) => return,
                    Err(_) => {
                        // Idle: no new sender finds this queue; what was
                        // sent into it meanwhile still goes.
                        {
                            let mut queues = self.dispatcher.batches.queues.lock().expect("lock");
                            if queues.get(&address).is_some_and(|(known, _)| *known == id) {
                                queues.remove(&address);
                            }
                        }
                        commands.close();
                        while let Some(first) = carried.take().or(commands.recv().await) {
                            let batch;
                            (batch, carried) = gather(first, &mut commands);
                            self.send_batch(&address, batch).await;
                        }
                        return;
                    }
                },
            };
            let Ok(permit) = in_flight.clone().acquire_owned().await else {
                return;
            };
            // Taken after the permit: what queued while the earlier
            // batches were on their way goes in this one.
            let batch;
            (batch, carried) = gather(first, &mut commands);
            let scheduler = self.clone();
            let address = address.clone();
            self.tasks.spawn(async move {
                scheduler.send_batch(&address, batch).await;
                drop(permit);
            });
        }
    }

    /// Sends `batch` as one request and hands out the answers.
    async fn send_batch(self: &Arc<Self>, address: &str, batch: Vec<Queued>) {
        let mut body =
            Vec::with_capacity(batch.iter().map(|q| q.body.len() + 1).sum::<usize>() + 16);
        body.extend_from_slice(b"{\"commands\":[");
        for (at, queued) in batch.iter().enumerate() {
            if at > 0 {
                body.push(b',');
            }
            body.extend_from_slice(&queued.body);
        }
        body.extend_from_slice(b"]}");
        let bearer = self.executor_bearer(address).await;
        let response = self
            .dispatcher
            .http
            .post(format!("{address}{}", executor_paths::RUN_BATCH))
            .bearer_auth(bearer)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        let answers = match response {
            Ok(response) if response.status().is_success() => {
                match response.json::<RunBatchResponse>().await {
                    Ok(answers) if answers.answers.len() == batch.len() => answers.answers,
                    Ok(answers) => {
                        let message = format!(
                            "{address} answered {} of {} commands",
                            answers.answers.len(),
                            batch.len()
                        );
                        return fail_all(batch, &message);
                    }
                    Err(error) => {
                        return fail_all(batch, &format!("{address} answered badly: {error}"));
                    }
                }
            }
            Ok(response) if response.status() == reqwest::StatusCode::NOT_FOUND => {
                // An executor from before batches: one request each.
                for queued in batch {
                    let answer = self.send_alone(address, queued.body).await;
                    let _ = queued.reply.send(answer);
                }
                return;
            }
            Ok(response) => {
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                tracing::warn!(%address, %status, body, "executor refused a batch of runs");
                return fail_all(
                    batch,
                    &format!("trigger failed: {address} answered {status}"),
                );
            }
            Err(error) => return fail_all(batch, &format!("trigger failed: {address}: {error}")),
        };
        for (queued, answer) in batch.into_iter().zip(answers) {
            let _ = queued.reply.send(match answer {
                RunAnswer::Answered(response) => Answer::Response(response),
                RunAnswer::Failed { status, error } => Answer::Refused {
                    status,
                    message: error.message,
                },
            });
        }
    }

    /// Sends one command in a request of its own (`run`).
    pub(super) async fn send_alone(self: &Arc<Self>, address: &str, body: Bytes) -> Answer {
        let bearer = self.executor_bearer(address).await;
        let response = self
            .dispatcher
            .http
            .post(format!("{address}{}", executor_paths::RUN))
            .bearer_auth(bearer)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        match response {
            Ok(response) if response.status().is_success() => {
                match response.json::<RunResponse>().await {
                    Ok(answer) => Answer::Response(answer),
                    Err(error) => Answer::Failed(format!("{address} answered badly: {error}")),
                }
            }
            Ok(response) => {
                let status = response.status().as_u16();
                let message = response.text().await.unwrap_or_default();
                Answer::Refused { status, message }
            }
            Err(error) => Answer::Failed(format!("trigger failed: {address}: {error}")),
        }
    }
}

/// `first` and what else has queued, within a batch's bounds; the command
/// that would have overflowed them comes back apart.
fn gather(
    first: Queued,
    commands: &mut mpsc::UnboundedReceiver<Queued>,
) -> (Vec<Queued>, Option<Queued>) {
    let mut bytes = first.body.len();
    let mut batch = vec![first];
    while batch.len() < RunBatch::MAX {
        let Ok(next) = commands.try_recv() else {
            break;
        };
        if bytes + next.body.len() > BATCH_BYTES {
            return (batch, Some(next));
        }
        bytes += next.body.len();
        batch.push(next);
    }
    (batch, None)
}

/// Gives every command of `batch` the same failure.
fn fail_all(batch: Vec<Queued>, message: &str) {
    for queued in batch {
        let _ = queued.reply.send(Answer::Failed(message.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(bytes: usize) -> Queued {
        Queued {
            body: Bytes::from(vec![b' '; bytes]),
            reply: oneshot::channel().0,
        }
    }

    #[test]
    fn a_batch_takes_what_queued_within_its_count_and_bytes() {
        let (queue, mut commands) = mpsc::unbounded_channel();
        for _ in 0..RunBatch::MAX + 5 {
            queue.send(queued(10)).unwrap();
        }
        let (batch, carried) = gather(commands.try_recv().unwrap(), &mut commands);
        assert_eq!((batch.len(), carried.is_none()), (RunBatch::MAX, true));
        let (batch, _) = gather(commands.try_recv().unwrap(), &mut commands);
        assert_eq!(batch.len(), 5, "the rest");

        // A command that would pass the bytes goes first in the next batch;
        // one larger than a batch goes alone.
        for bytes in [BATCH_BYTES / 2, BATCH_BYTES / 2, 1, BATCH_BYTES * 2, 1] {
            queue.send(queued(bytes)).unwrap();
        }
        let (batch, carried) = gather(commands.try_recv().unwrap(), &mut commands);
        assert_eq!(batch.len(), 2);
        let (batch, carried) = gather(carried.unwrap(), &mut commands);
        assert_eq!(batch.len(), 1);
        let big = carried.unwrap();
        assert_eq!(big.body.len(), BATCH_BYTES * 2);
        let (batch, carried) = gather(big, &mut commands);
        assert_eq!(batch.len(), 1, "alone");
        assert_eq!(carried.unwrap().body.len(), 1);
    }
}
