//! The admin's domain types that are stored as text: each has one wire
//! name, decodes from the database strictly (an unknown stored value is a
//! decode error naming the column, never a silent default) and serializes
//! to the API under the same name.
//!
//! Schedule types, route strategies, block strategies and trigger kinds
//! live with what uses them (`schedule`, `routing`, the protocol); this
//! module adds the ones only the admin has.

use std::str::FromStr;

use cronbox_protocol::UnknownName;
use serde::{Deserialize, Serialize};

/// Defines an enum of wire names with `as_str`, `FromStr`, `Display` and
/// serde under those names.
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The stored and wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;

            fn from_str(text: &str) -> Result<Self, UnknownName> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|value| value.as_str() == text)
                    .ok_or_else(|| UnknownName::new($what, text))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        // By hand: the derive cannot read the wire names through the macro.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text,)*]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
        }
    };
}

named_enum! {
    /// Where a run is in its life.
    RunStatus, "run status" {
        /// Written, not yet accepted by an executor.
        Pending => "pending",
        /// Accepted by an executor; its result is awaited.
        Dispatched => "dispatched",
        /// Ended successfully.
        Success => "success",
        /// Ended in any other way (the outcome says how).
        Failed => "failed",
        /// Never ran: its job was stopped or killed while it waited. Not a
        /// failure: no alarm, no retry, counted apart.
        Cancelled => "cancelled",
    }
}

impl RunStatus {
    /// Whether the run has not ended yet.
    pub fn is_open(self) -> bool {
        matches!(self, RunStatus::Pending | RunStatus::Dispatched)
    }
}

named_enum! {
    /// Where a run's failure alarm is.
    AlarmState, "alarm state" {
        /// No alarm is due (success, not ended yet, or ended on purpose).
        None => "none",
        /// Failed; its job's webhook is to be called.
        Due => "due",
        /// Claimed by one admin, which is calling the webhook.
        Sending => "sending",
        /// Delivered.
        Sent => "sent",
        /// No attempt was delivered.
        Failed => "failed",
        /// Failed, but its job has no webhook.
        NotConfigured => "not_configured",
    }
}

named_enum! {
    /// What to do with a fire found later than the job's misfire threshold.
    MisfirePolicy, "misfire policy" {
        /// Skip it; plan the next fire from now.
        DoNothing => "DO_NOTHING",
        /// Run once now (kind `misfire`), then plan from now.
        FireOnceNow => "FIRE_ONCE_NOW",
    }
}

/// Defines an id newtype over the database's `BIGINT` key: serialized,
/// parsed (from a path segment) and stored as the bare number, and never
/// confused with another kind of id.
macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize,
            Deserialize, sqlx::Type, utoipa::ToSchema,
        )]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(pub i64);

        impl $name {
            /// The number as the executor protocol carries it.
            pub fn wire(self) -> u64 {
                u64::try_from(self.0).unwrap_or_default()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = std::num::ParseIntError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                text.parse().map($name)
            }
        }

        impl From<u64> for $name {
            /// From the executor protocol's number.
            fn from(wire: u64) -> Self {
                $name(i64::try_from(wire).unwrap_or(i64::MAX))
            }
        }
    };
}

id_type! {
    /// A job's id.
    JobId
}

id_type! {
    /// A run's id.
    RunId
}
