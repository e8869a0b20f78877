//! Calendars a tenant's jobs share: named lists of dates they do not fire
//! on.

use cronbox_api::Calendar;

use super::rows::json_column;
use super::*;

fn calendar_from_row(row: &AnyRow) -> Result<Calendar, sqlx::Error> {
    Ok(Calendar {
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        dates: json_column(row, "dates")?,
        updated_at_ms: row.try_get("updated_at_ms")?,
    })
}

impl Store {
    /// Sets a calendar's dates, creating it if new.
    pub async fn put_calendar(&self, calendar: &Calendar) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO calendar (tenant, name, dates, updated_at_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (tenant, name) DO UPDATE SET dates = excluded.dates, \
             updated_at_ms = excluded.updated_at_ms",
        )
        .bind(&calendar.tenant)
        .bind(&calendar.name)
        .bind(json_text("dates", &calendar.dates)?)
        .bind(calendar.updated_at_ms)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The calendars of `tenant` (every tenant's for `None`), by tenant and
    /// name.
    pub async fn calendars(&self, tenant: Option<&str>) -> Result<Vec<Calendar>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, name, dates, updated_at_ms FROM calendar \
             WHERE tenant = $1 OR $2 = 1 ORDER BY tenant, name",
        )
        .bind(tenant.unwrap_or(""))
        .bind(i64::from(tenant.is_none()))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(calendar_from_row)
            .collect::<Result<_, _>>()
            .map_err(StoreError::from)
    }

    /// Deletes a calendar; false if there was none.
    pub async fn delete_calendar(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("DELETE FROM calendar WHERE tenant = $1 AND name = $2")
                .bind(tenant)
                .bind(name)
                .execute(&self.writer)
                .await?
                .rows_affected()
                == 1,
        )
    }
}
