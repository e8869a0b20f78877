//! Enrolled executors' credentials (`0027_executor_credentials.sql`):
//! made, listed, looked up by a presented token's hash, rotated with an
//! overlap, revoked with their registrations; and whether a module is one
//! an enrolled executor's groups run.

use cronbox_api::ExecutorToken;

use super::rows::json_column;
use super::*;

/// Who an enrolled executor's token says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnrolledExecutor {
    pub id: i64,
    pub groups: Vec<String>,
}

impl Store {
    /// Enrolls an executor: its credential, by the token's hash; its id.
    pub async fn add_executor_credential(
        &self,
        name: &str,
        groups: &[String],
        token_hash: &str,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        Ok(sqlx::query(
            "INSERT INTO executor_credential (name, groups, token_hash, created_at_ms) \
             VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(name)
        .bind(json_text("groups", groups)?)
        .bind(token_hash)
        .bind(now_ms)
        .fetch_one(&self.writer)
        .await?
        .try_get("id")?)
    }

    /// Every enrolled executor, newest first, with the addresses
    /// registered with each now.
    pub async fn executor_credentials(&self) -> Result<Vec<ExecutorToken>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, name, groups, created_at_ms, rotated_at_ms, previous_until_ms, \
             revoked_at_ms FROM executor_credential ORDER BY id DESC",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut credentials = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: i64 = row.try_get("id")?;
            let registered = sqlx::query(
                "SELECT DISTINCT address FROM registry WHERE credential_id = $1 ORDER BY address",
            )
            .bind(id)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| row.try_get("address"))
            .collect::<Result<_, _>>()?;
            credentials.push(ExecutorToken {
                id,
                name: row.try_get("name")?,
                groups: json_column(row, "groups")?,
                created_at_ms: row.try_get("created_at_ms")?,
                rotated_at_ms: row.try_get("rotated_at_ms")?,
                previous_valid_until_ms: row.try_get("previous_until_ms")?,
                revoked_at_ms: row.try_get("revoked_at_ms")?,
                registered,
            });
        }
        Ok(credentials)
    }

    /// The enrolled executor whose token hashes to `hash`, if it works at
    /// `now_ms`: its current token, or the one before while its overlap
    /// lasts; never once revoked.
    pub async fn enrolled_executor(
        &self,
        hash: &str,
        now_ms: i64,
    ) -> Result<Option<EnrolledExecutor>, StoreError> {
        let row = sqlx::query(
            "SELECT id, groups FROM executor_credential WHERE revoked_at_ms IS NULL \
             AND (token_hash = $1 OR (previous_hash = $2 AND previous_until_ms > $3))",
        )
        .bind(hash)
        .bind(hash)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(EnrolledExecutor {
            id: row.try_get("id")?,
            groups: json_column(&row, "groups")?,
        }))
    }

    /// Gives credential `id` a new token (by its hash), the one before
    /// working until `previous_until_ms`: its name and groups, or `None`
    /// if there is no such live credential.
    pub async fn rotate_executor_credential(
        &self,
        id: i64,
        token_hash: &str,
        previous_until_ms: i64,
        now_ms: i64,
    ) -> Result<Option<(String, Vec<String>)>, StoreError> {
        let row = sqlx::query(
            "UPDATE executor_credential SET previous_hash = token_hash, token_hash = $1, \
             previous_until_ms = $2, rotated_at_ms = $3 WHERE id = $4 AND revoked_at_ms IS NULL \
             RETURNING name, groups",
        )
        .bind(token_hash)
        .bind(previous_until_ms)
        .bind(now_ms)
        .bind(id)
        .fetch_optional(&self.writer)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some((row.try_get("name")?, json_column(&row, "groups")?)))
    }

    /// Revokes credential `id` and ends its registrations (how many);
    /// `None` if there was no such credential.
    pub async fn revoke_executor_credential(
        &self,
        id: i64,
        now_ms: i64,
    ) -> Result<Option<u64>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let known = sqlx::query(
            "UPDATE executor_credential SET revoked_at_ms = COALESCE(revoked_at_ms, $1) \
             WHERE id = $2",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if known == 0 {
            return Ok(None);
        }
        let ended = sqlx::query("DELETE FROM registry WHERE credential_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Some(ended))
    }

    /// What admins present to the executor at `address`, when it
    /// registered with an enrolled credential.
    pub async fn admin_proof_of(&self, address: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query(
            "SELECT admin_proof FROM registry WHERE address = $1 AND admin_proof IS NOT NULL \
             ORDER BY updated_at_ms DESC LIMIT 1",
        )
        .bind(address)
        .fetch_optional(&self.pool)
        .await?
        .map(|row| row.try_get("admin_proof"))
        .transpose()?)
    }

    /// The credentials (`None`: the shared token) that `address` is
    /// registered with, in registrations beating since `alive_since_ms`.
    pub async fn address_credentials(
        &self,
        address: &str,
        alive_since_ms: i64,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        Ok(sqlx::query(
            "SELECT credential_id FROM registry WHERE address = $1 AND updated_at_ms >= $2",
        )
        .bind(address)
        .bind(alive_since_ms)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| row.try_get("credential_id"))
        .collect::<Result<_, _>>()?)
    }

    /// Whether module `digest` is run in one of `groups`: a job there
    /// names it, or an open run of a job there was written with it.
    pub async fn module_runs_in_groups(
        &self,
        digest: &Digest,
        groups: &[String],
    ) -> Result<bool, StoreError> {
        for group in groups {
            let named = sqlx::query(
                "SELECT 1 FROM job WHERE module_digest = $1 AND group_name = $2 LIMIT 1",
            )
            .bind(digest.as_str())
            .bind(group)
            .fetch_optional(&self.pool)
            .await?;
            if named.is_some() {
                return Ok(true);
            }
            let open = sqlx::query(
                "SELECT 1 FROM run r JOIN job j ON j.id = r.job_id \
                 WHERE r.module_sha = $1 AND j.group_name = $2 \
                 AND r.status IN ('pending', 'dispatched') LIMIT 1",
            )
            .bind(digest_bytes(digest))
            .bind(group)
            .fetch_optional(&self.pool)
            .await?;
            if open.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
