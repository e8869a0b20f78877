//! The audit log's table: entries appended, read newest first by filter
//! and page, and deleted past their retention.

use cronbox_api::{AuditEntry, Role};

use super::*;
use rows::decode_optional;

/// An entry to append (its id is the table's).
pub type NewAuditEntry = AuditEntry;

/// Which entries a page of the audit log holds.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only this tenant's (`None`: every tenant's).
    pub tenant: Option<String>,
    pub actor: Option<String>,
    /// Only actions containing this text (`jobs`, `POST`).
    pub action: Option<String>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// Entries older than this id (the previous page's `next_before`).
    pub before_id: Option<i64>,
    pub limit: i64,
}

fn entry_from_row(row: &AnyRow) -> Result<AuditEntry, sqlx::Error> {
    let detail: Option<String> = row.try_get("detail")?;
    let status: i64 = row.try_get("status")?;
    let status = u16::try_from(status).unwrap_or_default();
    Ok(AuditEntry {
        id: row.try_get("id")?,
        at_ms: row.try_get("at_ms")?,
        tenant: row.try_get("tenant")?,
        actor: row.try_get("actor")?,
        role: decode_optional::<Role>(row, "role")?,
        token_id: row.try_get("token_id")?,
        action: row.try_get("action")?,
        target: row.try_get("target")?,
        status,
        outcome: audit_outcome(status).to_owned(),
        address: row.try_get("address")?,
        user_agent: row.try_get("user_agent")?,
        detail: detail
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|error| sqlx::Error::ColumnDecode {
                index: "detail".to_owned(),
                source: Box::new(error),
            })?,
    })
}

/// How an answer's status reads in the log.
pub fn audit_outcome(status: u16) -> &'static str {
    match status {
        200..=399 => "ok",
        400..=499 => "refused",
        _ => "failed",
    }
}

impl Store {
    /// Appends `entry` (its `id` and `outcome` are ignored).
    pub async fn append_audit(&self, entry: &NewAuditEntry) -> Result<(), StoreError> {
        let detail = entry
            .detail
            .as_ref()
            .map(|detail| json_text("detail", detail))
            .transpose()?;
        sqlx::query(
            "INSERT INTO audit (at_ms, tenant, actor, role, token_id, action, target, status, \
             address, user_agent, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(entry.at_ms)
        .bind(&entry.tenant)
        .bind(&entry.actor)
        .bind(entry.role.map(|role| role.as_str()))
        .bind(entry.token_id)
        .bind(&entry.action)
        .bind(&entry.target)
        .bind(i64::from(entry.status))
        .bind(&entry.address)
        .bind(&entry.user_agent)
        .bind(detail)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// A page of the audit log, newest first.
    pub async fn audit_page(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, at_ms, tenant, actor, role, token_id, action, target, status, address, \
             user_agent, detail FROM audit \
             WHERE ($1 = 1 OR tenant = $2) AND ($3 = 1 OR actor = $4) \
             AND ($5 = 1 OR action LIKE $6) AND at_ms >= $7 AND at_ms <= $8 AND id < $9 \
             ORDER BY id DESC LIMIT $10",
        )
        .bind(i64::from(filter.tenant.is_none()))
        .bind(filter.tenant.as_deref().unwrap_or(""))
        .bind(i64::from(filter.actor.is_none()))
        .bind(filter.actor.as_deref().unwrap_or(""))
        .bind(i64::from(filter.action.is_none()))
        .bind(format!(
            "%{}%",
            filter
                .action
                .as_deref()
                .unwrap_or("")
                .replace(['%', '_'], "")
        ))
        .bind(filter.from_ms.unwrap_or(i64::MIN))
        .bind(filter.to_ms.unwrap_or(i64::MAX))
        .bind(filter.before_id.unwrap_or(i64::MAX))
        .bind(filter.limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(entry_from_row)
            .collect::<Result<_, _>>()
            .map_err(StoreError::from)
    }

    /// Deletes the entries made before `before_ms`; how many.
    pub async fn delete_audit_before(&self, before_ms: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM audit WHERE at_ms < $1")
            .bind(before_ms)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }
}
