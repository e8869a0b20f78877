//! Executor groups: `AUTO` (the executors that register in them) or
//! `MANUAL` (the addresses the operator lists).

use super::ServiceError;
use crate::store::Store;

/// Creates or replaces group `name`; returns its address type as stored
/// (`AUTO` or `MANUAL`). A MANUAL group needs http(s) addresses.
pub async fn put(
    store: &Store,
    name: &str,
    address_type: &str,
    addresses: &[String],
) -> Result<String, ServiceError> {
    let invalid = |field, message: String| ServiceError::InvalidGroup { field, message };
    let kind = address_type.to_ascii_uppercase();
    if kind != "AUTO" && kind != "MANUAL" {
        return Err(invalid(
            "address_type",
            format!("unknown address_type {address_type:?}: use AUTO or MANUAL"),
        ));
    }
    if kind == "MANUAL" && addresses.is_empty() {
        return Err(invalid(
            "addresses",
            "a MANUAL group needs addresses".to_owned(),
        ));
    }
    if let Some(bad) = addresses.iter().find(|address| {
        !(address.starts_with("http://") || address.starts_with("https://"))
            || address.contains(',')
    }) {
        return Err(invalid(
            "addresses",
            format!("address {bad:?} is not an http(s) URL"),
        ));
    }
    store.put_group(name, &kind, addresses).await?;
    Ok(kind)
}
