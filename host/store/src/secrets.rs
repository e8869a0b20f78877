//! Tenants' secrets, stored sealed (the admin seals and opens them; the
//! store sees only nonce and ciphertext), and the jobs that reference them.

use super::*;

/// A value as stored: nonce and ciphertext (with its tag), in hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub nonce: String,
    pub ciphertext: String,
}

impl Store {
    /// Stores secret `name` of `tenant`, replacing its value if it exists.
    pub async fn put_secret(
        &self,
        tenant: &str,
        name: &str,
        sealed: &Sealed,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO tenant_secret (tenant, name, nonce, ciphertext, created_at_ms, \
             updated_at_ms) VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (tenant, name) DO UPDATE \
             SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, \
             updated_at_ms = excluded.updated_at_ms",
        )
        .bind(tenant)
        .bind(name)
        .bind(&sealed.nonce)
        .bind(&sealed.ciphertext)
        .bind(now_ms)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The secrets of `tenant` (every tenant's for `None`): tenant, name,
    /// created and updated instants, by tenant and name.
    pub async fn secrets(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<(String, String, i64, i64)>, StoreError> {
        const COLUMNS: &str =
            "SELECT tenant, name, created_at_ms, updated_at_ms FROM tenant_secret";
        let rows = match tenant {
            Some(tenant) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "{COLUMNS} WHERE tenant = $1 ORDER BY tenant, name"
                )))
                .bind(tenant)
                .fetch_all(&self.pool)
                .await?
            }
            None => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "{COLUMNS} ORDER BY tenant, name"
                )))
                .fetch_all(&self.pool)
                .await?
            }
        };
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("tenant")?,
                    row.try_get("name")?,
                    row.try_get("created_at_ms")?,
                    row.try_get("updated_at_ms")?,
                ))
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Deletes secret `name` of `tenant`; false if there was none.
    pub async fn delete_secret(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("DELETE FROM tenant_secret WHERE tenant = $1 AND name = $2")
                .bind(tenant)
                .bind(name)
                .execute(&self.writer)
                .await?
                .rows_affected()
                == 1,
        )
    }

    /// The sealed values of those of `names` that `tenant` has.
    pub async fn sealed_secrets(
        &self,
        tenant: &str,
        names: &[String],
    ) -> Result<Vec<(String, Sealed)>, StoreError> {
        let mut found = Vec::with_capacity(names.len());
        for name in names {
            let row = sqlx::query(
                "SELECT nonce, ciphertext FROM tenant_secret WHERE tenant = $1 AND name = $2",
            )
            .bind(tenant)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
            if let Some(row) = row {
                found.push((
                    name.clone(),
                    Sealed {
                        nonce: row.try_get("nonce")?,
                        ciphertext: row.try_get("ciphertext")?,
                    },
                ));
            }
        }
        Ok(found)
    }

    /// Ids of `tenant`'s jobs that reference secret `name`.
    pub async fn jobs_referencing_secret(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Vec<i64>, StoreError> {
        // The column is a JSON array of names; the LIKE narrows, the
        // parse decides.
        let pattern = format!("%\"{name}\"%");
        let rows = sqlx::query(
            "SELECT id, secrets FROM job WHERE tenant = $1 AND secrets LIKE $2 ORDER BY id",
        )
        .bind(tenant)
        .bind(pattern)
        .fetch_all(&self.pool)
        .await?;
        let mut ids = Vec::new();
        for row in rows {
            let text: String = row.try_get("secrets")?;
            let names: Vec<String> = serde_json::from_str(&text).unwrap_or_default();
            if names.iter().any(|named| named == name) {
                ids.push(row.try_get("id")?);
            }
        }
        Ok(ids)
    }

    /// The jobs of `tenant` that follow module `name` (its latest version,
    /// not a pinned one) and read secrets.
    pub async fn secret_jobs_following(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Vec<i64>, StoreError> {
        let rows = sqlx::query(
            "SELECT id FROM job WHERE tenant = $1 AND module_name = $2 \
             AND module_version IS NULL AND secrets <> '[]' ORDER BY id",
        )
        .bind(tenant)
        .bind(name)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| row.try_get("id"))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }
}
