//! Tenants and their API tokens (stored as sha256).

use super::rows::json_column;
use super::*;

impl Store {
    /// Creates a tenant; false if it exists.
    pub async fn create_tenant(&self, name: &str, now_ms: i64) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "INSERT INTO tenant (name, created_at_ms) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(now_ms)
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// Every tenant with its number of tokens.
    pub async fn tenants(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, (SELECT COUNT(*) FROM api_token WHERE api_token.tenant = tenant.name) \
             AS tokens FROM tenant ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("name")?, row.try_get("tokens")?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Revokes token `id` of `tenant`; false if there was none.
    pub async fn revoke_token(&self, tenant: &str, id: i64) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("DELETE FROM api_token WHERE tenant = $1 AND id = $2")
                .bind(tenant)
                .bind(id)
                .execute(&self.writer)
                .await?
                .rows_affected()
                == 1,
        )
    }
}

impl Store {
    /// The origins `tenant`'s jobs may be granted (none when never set).
    pub async fn http_ceiling(&self, tenant: &str) -> Result<Vec<String>, StoreError> {
        Ok(self.read_http_ceiling(tenant).await?.0)
    }

    /// `tenant`'s ceiling parsed: a stored origin that no longer parses is
    /// a decode error naming the column, never an empty ceiling.
    pub async fn http_ceiling_patterns(
        &self,
        tenant: &str,
    ) -> Result<Vec<cronbox_net_policy::OriginPattern>, StoreError> {
        Ok(self.read_http_ceiling(tenant).await?.1)
    }

    /// `tenant`'s ceiling as stored and parsed.
    async fn read_http_ceiling(
        &self,
        tenant: &str,
    ) -> Result<(Vec<String>, Vec<cronbox_net_policy::OriginPattern>), StoreError> {
        let row = sqlx::query("SELECT origins FROM tenant_http_ceiling WHERE tenant = $1")
            .bind(tenant)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else {
            return Ok((Vec::new(), Vec::new()));
        };
        let origins: Vec<String> = json_column(&row, "origins")?;
        let patterns = cronbox_net_policy::parse_origins(&origins).map_err(|error| {
            sqlx::Error::ColumnDecode {
                index: "origins".to_owned(),
                source: Box::new(error),
            }
        })?;
        Ok((origins, patterns))
    }

    /// Replaces `tenant`'s ceiling.
    pub async fn set_http_ceiling(
        &self,
        tenant: &str,
        origins: &[String],
    ) -> Result<(), StoreError> {
        let text = json_text("origins", origins)?;
        sqlx::query(
            "INSERT INTO tenant_http_ceiling (tenant, origins) VALUES ($1, $2) \
             ON CONFLICT (tenant) DO UPDATE SET origins = excluded.origins",
        )
        .bind(tenant)
        .bind(text)
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}
