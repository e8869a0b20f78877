//! Identifiers: job and run ids over the database's `BIGINT` keys (the
//! sha256 digest that names a module's content is the protocol's
//! [`Digest`](cronbox_protocol::Digest)).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Defines an id newtype over the database's `BIGINT` key: serialized,
/// parsed (from a path segment) and stored as the bare number, and never
/// confused with another kind of id.
macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize,
            Deserialize, utoipa::ToSchema,
        )]
        #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
        #[serde(transparent)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_travel_as_bare_numbers() {
        assert_eq!(serde_json::to_string(&JobId(7)).unwrap(), "7");
        assert_eq!("12".parse::<RunId>().unwrap(), RunId(12));
        assert_eq!(RunId::from(u64::MAX), RunId(i64::MAX));
    }
}
