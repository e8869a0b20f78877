//! Following a run through its event stream (`GET /api/v1/runs/{id}/events`):
//! the run each time it changes, its log lines as they are written, and its
//! end, read as server-sent events.

use cronbox_protocol::LogResponse;
use reqwest::Method;

use crate::client::refusal;
use crate::{Client, ClientError, Run, RunId};

/// One event of a followed run.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowEvent {
    /// The run, as it changed.
    Run(Box<Run>),
    /// New lines of its log.
    Log(LogResponse),
    /// The run ended and every line was sent; nothing follows.
    End(Box<Run>),
}

/// An open event stream of one run.
#[derive(Debug)]
pub struct RunFollower {
    base: String,
    response: reqwest::Response,
    /// Text received and not yet parsed into events.
    buffer: String,
}

impl Client {
    /// Opens run `id`'s event stream, its log from line `offset`.
    pub async fn follow(&self, id: RunId, offset: usize) -> Result<RunFollower, ClientError> {
        let path = format!("/api/v1/runs/{id}/events?offset={offset}");
        let unreachable = |source| ClientError::Unreachable {
            base: self.base().to_owned(),
            source,
        };
        let response = self
            .request(Method::GET, &path)
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let bytes = response.bytes().await.map_err(unreachable)?;
            return Err(refusal(status, &bytes));
        }
        Ok(RunFollower {
            base: self.base().to_owned(),
            response,
            buffer: String::new(),
        })
    }
}

impl RunFollower {
    /// The next event; `None` once the stream ended (after an
    /// [`FollowEvent::End`], or cut short: then follow again from the
    /// last line's offset).
    pub async fn next(&mut self) -> Result<Option<FollowEvent>, ClientError> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse(&block)? {
                    return Ok(Some(event));
                }
                continue; // a comment (keep-alive) or an unknown event
            }
            let chunk = self
                .response
                .chunk()
                .await
                .map_err(|source| ClientError::Unreachable {
                    base: self.base.clone(),
                    source,
                })?;
            match chunk {
                Some(chunk) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                None => return Ok(None),
            }
        }
    }
}

/// The event of one block of the stream (`event:` and `data:` lines).
fn parse(block: &str) -> Result<Option<FollowEvent>, ClientError> {
    let mut name = "";
    let mut data = String::new();
    for line in block.lines() {
        if let Some(value) = line.strip_prefix("event:") {
            name = value.trim();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    let unexpected = |reason: serde_json::Error| ClientError::UnexpectedAnswer {
        status: 200,
        expected: "a run event",
        reason: reason.to_string(),
    };
    Ok(match name {
        "run" => Some(FollowEvent::Run(
            serde_json::from_str(&data).map_err(unexpected)?,
        )),
        "log" => Some(FollowEvent::Log(
            serde_json::from_str(&data).map_err(unexpected)?,
        )),
        "end" => Some(FollowEvent::End(
            serde_json::from_str(&data).map_err(unexpected)?,
        )),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_parse_into_events_and_comments_are_skipped() {
        let log = "event: log\ndata: {\"run_id\":3,\"lines\":[],\"next_offset\":0,\"finished\":false}\n\n";
        match parse(log).unwrap() {
            Some(FollowEvent::Log(page)) => assert_eq!(page.run_id, 3),
            other => panic!("{other:?}"),
        }
        assert_eq!(parse(":\n\n").unwrap(), None);
        assert!(parse("event: run\ndata: {\n\n").is_err());
    }
}
