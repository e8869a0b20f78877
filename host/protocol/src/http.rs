//! The limits of a run's outbound HTTP (`wasi:http/outgoing-handler`).

use serde::{Deserialize, Serialize};

/// How much outbound HTTP one run may do. A job sets these (each field
/// defaults when omitted); the admin refuses a value over
/// [`HttpLimits::MAX`] and an executor lowers each to its operator's
/// maximum. The timeouts never reach past the run's own deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct HttpLimits {
    /// Requests per run.
    pub max_requests: u32,
    /// Requests in flight at once (from sending to the end of the
    /// response body).
    pub max_concurrent: u32,
    /// Request body bytes per run, all requests together.
    pub max_bytes_sent: u64,
    /// Response body bytes per run, all requests together.
    pub max_bytes_received: u64,
    /// Time to connect (TCP and TLS), in milliseconds.
    pub connect_timeout_ms: u64,
    /// Time from sending a request to the response's headers, in
    /// milliseconds.
    pub first_byte_timeout_ms: u64,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_requests: 100,
            max_concurrent: 8,
            max_bytes_sent: 8 << 20,
            max_bytes_received: 64 << 20,
            connect_timeout_ms: 10_000,
            first_byte_timeout_ms: 30_000,
        }
    }
}

impl HttpLimits {
    /// The most a job may ask for.
    pub const MAX: HttpLimits = HttpLimits {
        max_requests: 10_000,
        max_concurrent: 64,
        max_bytes_sent: 1 << 30,
        max_bytes_received: 1 << 30,
        connect_timeout_ms: 60_000,
        first_byte_timeout_ms: 600_000,
    };

    /// Each field as `(name, value)`, in declaration order.
    pub fn fields(&self) -> [(&'static str, u64); 6] {
        [
            ("max_requests", u64::from(self.max_requests)),
            ("max_concurrent", u64::from(self.max_concurrent)),
            ("max_bytes_sent", self.max_bytes_sent),
            ("max_bytes_received", self.max_bytes_received),
            ("connect_timeout_ms", self.connect_timeout_ms),
            ("first_byte_timeout_ms", self.first_byte_timeout_ms),
        ]
    }

    /// The first field over `max`'s, as `(name, value, maximum)`; a zero
    /// is refused too (no request could go out; leave the job without
    /// grants instead).
    pub fn first_outside(&self, max: &HttpLimits) -> Option<(&'static str, u64, u64)> {
        self.fields()
            .into_iter()
            .zip(max.fields())
            .find(|((_, value), (_, max))| *value == 0 || value > max)
            .map(|((name, value), (_, max))| (name, value, max))
    }

    /// Sets the field `name` to `value`; false when there is no such
    /// field or the value does not fit it.
    pub fn set_field(&mut self, name: &str, value: u64) -> bool {
        let narrow = |value: u64| u32::try_from(value).ok();
        match name {
            "max_requests" => narrow(value).map(|v| self.max_requests = v).is_some(),
            "max_concurrent" => narrow(value).map(|v| self.max_concurrent = v).is_some(),
            "max_bytes_sent" => {
                self.max_bytes_sent = value;
                true
            }
            "max_bytes_received" => {
                self.max_bytes_received = value;
                true
            }
            "connect_timeout_ms" => {
                self.connect_timeout_ms = value;
                true
            }
            "first_byte_timeout_ms" => {
                self.first_byte_timeout_ms = value;
                true
            }
            _ => false,
        }
    }

    /// Each field the smaller of the two.
    pub fn min(&self, other: &HttpLimits) -> HttpLimits {
        HttpLimits {
            max_requests: self.max_requests.min(other.max_requests),
            max_concurrent: self.max_concurrent.min(other.max_concurrent),
            max_bytes_sent: self.max_bytes_sent.min(other.max_bytes_sent),
            max_bytes_received: self.max_bytes_received.min(other.max_bytes_received),
            connect_timeout_ms: self.connect_timeout_ms.min(other.connect_timeout_ms),
            first_byte_timeout_ms: self.first_byte_timeout_ms.min(other.first_byte_timeout_ms),
        }
    }

    /// Whether every field has its default.
    pub fn is_default(&self) -> bool {
        *self == HttpLimits::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_within_the_maximum_and_zero_or_excess_is_named() {
        assert_eq!(HttpLimits::default().first_outside(&HttpLimits::MAX), None);
        let over = HttpLimits {
            max_concurrent: 65,
            ..HttpLimits::default()
        };
        assert_eq!(
            over.first_outside(&HttpLimits::MAX),
            Some(("max_concurrent", 65, 64))
        );
        let zero = HttpLimits {
            max_requests: 0,
            ..HttpLimits::default()
        };
        assert_eq!(
            zero.first_outside(&HttpLimits::MAX),
            Some(("max_requests", 0, 10_000))
        );
        let lower = HttpLimits {
            max_requests: 3,
            ..HttpLimits::MAX
        };
        assert_eq!(lower.min(&HttpLimits::default()).max_requests, 3);
        assert_eq!(
            lower.min(&HttpLimits::default()).max_bytes_sent,
            HttpLimits::default().max_bytes_sent
        );
    }

    #[test]
    fn every_field_can_be_set_by_name() {
        let mut limits = HttpLimits::default();
        for (index, (name, _)) in HttpLimits::default().fields().into_iter().enumerate() {
            assert!(limits.set_field(name, index as u64 + 1), "{name}");
        }
        let values: Vec<u64> = limits
            .fields()
            .into_iter()
            .map(|(_, value)| value)
            .collect();
        assert_eq!(values, [1, 2, 3, 4, 5, 6]);
        assert!(!limits.set_field("max_request", 1));
        assert!(!limits.set_field("max_requests", u64::MAX));
    }

    #[test]
    fn omitted_fields_take_their_defaults() {
        let limits: HttpLimits = serde_json::from_str(r#"{"max_requests": 2}"#).unwrap();
        assert_eq!(limits.max_requests, 2);
        assert_eq!(limits.max_concurrent, HttpLimits::default().max_concurrent);
        assert!(serde_json::from_str::<HttpLimits>(r#"{"max_request": 2}"#).is_err());
    }
}
