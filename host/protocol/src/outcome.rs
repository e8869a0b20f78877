//! How a run ended.

use serde::{Deserialize, Serialize};

/// How a run ended, with the detail that belongs to each ending.
///
/// xxl-job only knows codes 200 (success), 500 (failure) and 502 (timeout);
/// [`Outcome::code`] maps every outcome onto those for compatibility, while
/// the variant keeps the precise reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// `execute` returned `ok(message)`.
    Success { message: String },
    /// `execute` (or `init`) returned `err(message)`.
    Failed { message: String },
    /// The run passed its wall-clock deadline and was stopped.
    Timeout { timeout_ms: u64 },
    /// The run was killed on request.
    Killed,
    /// The run was replaced by a newer run of the same job (COVER_EARLY).
    Covered,
    /// The run used up its fuel budget.
    OutOfFuel { fuel: u64 },
    /// The guest asked for more linear memory than its limit allows and
    /// could not carry on.
    MemoryLimit { limit_bytes: u64 },
    /// The guest trapped (a panic, `unreachable`, a stack overflow, ...).
    Trap { message: String },
    /// The run was not executed at all (refused by a block strategy, a
    /// module that could not be loaded, a shutdown, ...).
    Rejected { reason: String },
}

/// The variant of an [`Outcome`] without its detail, for filters and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    Success,
    Failed,
    Timeout,
    Killed,
    Covered,
    OutOfFuel,
    MemoryLimit,
    Trap,
    Rejected,
}

impl OutcomeKind {
    /// Every kind, in a stable order (for metrics and documentation).
    pub const ALL: [OutcomeKind; 9] = [
        OutcomeKind::Success,
        OutcomeKind::Failed,
        OutcomeKind::Timeout,
        OutcomeKind::Killed,
        OutcomeKind::Covered,
        OutcomeKind::OutOfFuel,
        OutcomeKind::MemoryLimit,
        OutcomeKind::Trap,
        OutcomeKind::Rejected,
    ];

    /// The snake_case name used on the wire and in metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Success => "success",
            OutcomeKind::Failed => "failed",
            OutcomeKind::Timeout => "timeout",
            OutcomeKind::Killed => "killed",
            OutcomeKind::Covered => "covered",
            OutcomeKind::OutOfFuel => "out_of_fuel",
            OutcomeKind::MemoryLimit => "memory_limit",
            OutcomeKind::Trap => "trap",
            OutcomeKind::Rejected => "rejected",
        }
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Outcome {
    /// The outcome without its detail.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Success { .. } => OutcomeKind::Success,
            Outcome::Failed { .. } => OutcomeKind::Failed,
            Outcome::Timeout { .. } => OutcomeKind::Timeout,
            Outcome::Killed => OutcomeKind::Killed,
            Outcome::Covered => OutcomeKind::Covered,
            Outcome::OutOfFuel { .. } => OutcomeKind::OutOfFuel,
            Outcome::MemoryLimit { .. } => OutcomeKind::MemoryLimit,
            Outcome::Trap { .. } => OutcomeKind::Trap,
            Outcome::Rejected { .. } => OutcomeKind::Rejected,
        }
    }

    /// Whether the run succeeded (the only outcome whose state changes are
    /// committed and whose child jobs are triggered).
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Success { .. })
    }

    /// The xxl-job result code: 200 success, 502 timeout, 500 otherwise.
    pub fn code(&self) -> u16 {
        match self {
            Outcome::Success { .. } => 200,
            Outcome::Timeout { .. } => 502,
            _ => 500,
        }
    }

    /// A one-line human description, as stored in a run's result message.
    pub fn message(&self) -> String {
        match self {
            Outcome::Success { message } | Outcome::Failed { message } => message.clone(),
            Outcome::Timeout { timeout_ms } => format!("timed out after {timeout_ms} ms"),
            Outcome::Killed => "killed".to_owned(),
            Outcome::Covered => "covered by a newer run (COVER_EARLY)".to_owned(),
            Outcome::OutOfFuel { fuel } => format!("ran out of fuel (budget {fuel})"),
            Outcome::MemoryLimit { limit_bytes } => {
                format!("hit the memory limit of {limit_bytes} bytes")
            }
            Outcome::Trap { message } => format!("trapped: {message}"),
            Outcome::Rejected { reason } => format!("not run: {reason}"),
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.kind(), self.code(), self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_xxl_job() {
        assert_eq!(
            Outcome::Success {
                message: "ok".into()
            }
            .code(),
            200
        );
        assert_eq!(Outcome::Timeout { timeout_ms: 5 }.code(), 502);
        assert_eq!(Outcome::Killed.code(), 500);
        assert_eq!(
            Outcome::Trap {
                message: "x".into()
            }
            .code(),
            500
        );
    }

    #[test]
    fn wire_shape_is_tagged() {
        let json = serde_json::to_value(Outcome::OutOfFuel { fuel: 7 }).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"outcome": "out_of_fuel", "fuel": 7})
        );
        let back: Outcome = serde_json::from_value(json).unwrap();
        assert_eq!(back, Outcome::OutOfFuel { fuel: 7 });
        let kinds: Vec<&str> = OutcomeKind::ALL.iter().map(|k| k.as_str()).collect();
        for kind in OutcomeKind::ALL {
            let encoded = serde_json::to_value(kind).unwrap();
            assert_eq!(encoded.as_str(), Some(kind.as_str()));
        }
        assert_eq!(kinds.len(), 9);
    }
}
