//! Tenants' shared calendars: named sets of dates the jobs and workflows
//! that name them do not fire on. Setting or deleting one refreshes the
//! engine's copy, so the next fire already follows it.

use super::{ServiceError, Services};
use cronbox_api::Calendar;

/// Longest calendar name, bytes.
const MAX_CALENDAR_NAME: usize = 64;

/// The calendars of `tenant` (every tenant's for `None`).
pub async fn list(
    services: &Services,
    tenant: Option<&str>,
) -> Result<Vec<Calendar>, ServiceError> {
    Ok(services.store().calendars(tenant).await?)
}

/// Sets calendar `name` of `tenant` to `dates` (`YYYY-MM-DD`; kept sorted,
/// without repeats): the calendar as stored. A bad name or date is refused
/// naming the field.
pub async fn put(
    services: &Services,
    tenant: &str,
    name: String,
    dates: &[String],
) -> Result<Calendar, ServiceError> {
    let valid_name = (1..=MAX_CALENDAR_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !valid_name {
        return Err(ServiceError::invalid(
            "name",
            format!("calendar name {name:?} must be 1 to {MAX_CALENDAR_NAME} of A-Z a-z 0-9 - _ ."),
        ));
    }
    let dates = crate::schedule::parse_dates(dates)
        .map_err(|message| ServiceError::invalid("dates", message))?;
    let calendar = Calendar {
        tenant: tenant.to_owned(),
        name,
        dates: crate::schedule::date_texts(&dates),
        updated_at_ms: services.now_ms(),
    };
    services.store().put_calendar(&calendar).await?;
    services.firing().refresh_calendars().await?;
    services.firing().wake();
    Ok(calendar)
}

/// Deletes calendar `name` of `tenant` (its jobs fire on its dates from
/// then on): the calendar as it was.
pub async fn delete(
    services: &Services,
    tenant: &str,
    name: &str,
) -> Result<Calendar, ServiceError> {
    let store = services.store();
    let unknown = || ServiceError::UnknownCalendar(name.to_owned());
    let calendar = store
        .calendars(Some(tenant))
        .await?
        .into_iter()
        .find(|calendar| calendar.name == name)
        .ok_or_else(unknown)?;
    if !store.delete_calendar(tenant, name).await? {
        return Err(unknown());
    }
    services.firing().refresh_calendars().await?;
    Ok(calendar)
}
