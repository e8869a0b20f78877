//! The admin↔executor protocol's version, and which peers each side
//! serves. An executor's registration carries its version
//! ([`Registration::protocol`](crate::Registration::protocol)); the admin's
//! answer carries the admin's ([`PROTOCOL_HEADER`]). A peer that says
//! nothing speaks version 1, the protocol before versions were carried.
//!
//! The skew policy: admins of two versions in a row may share a database;
//! executors may be one version older than the oldest admin, never newer.
//! So an admin serves executors of its version and the one before, and an
//! executor registers with admins of its version and the one after.

/// The version this build speaks.
pub const PROTOCOL_VERSION: u32 = 2;

/// The header an admin's answer to a registration carries its version in.
pub const PROTOCOL_HEADER: &str = "cronbox-protocol";

/// A peer's version when it says none.
pub const UNVERSIONED: u32 = 1;

/// Why a peer's version is not served, in words naming both versions and
/// what to upgrade.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkewError {
    #[error(
        "this executor speaks protocol {executor} and this admin protocol {admin}: an executor \
         may be one version older than the admins, never newer; upgrade the admins first"
    )]
    ExecutorNewer { executor: u32, admin: u32 },
    #[error(
        "this executor speaks protocol {executor} and this admin protocol {admin}: an executor \
         may be at most one version older than the admins; upgrade the executor"
    )]
    ExecutorTooOld { executor: u32, admin: u32 },
}

/// Whether an admin of version `admin` serves an executor of version
/// `executor`.
pub fn check_skew(admin: u32, executor: u32) -> Result<(), SkewError> {
    if executor > admin {
        Err(SkewError::ExecutorNewer { executor, admin })
    } else if executor + 1 < admin {
        Err(SkewError::ExecutorTooOld { executor, admin })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admin_serves_its_version_and_the_one_before_only() {
        assert_eq!(check_skew(2, 2), Ok(()));
        assert_eq!(check_skew(2, 1), Ok(()));
        assert_eq!(
            check_skew(2, 3),
            Err(SkewError::ExecutorNewer {
                executor: 3,
                admin: 2
            })
        );
        assert_eq!(
            check_skew(3, 1),
            Err(SkewError::ExecutorTooOld {
                executor: 1,
                admin: 3
            })
        );
    }
}
