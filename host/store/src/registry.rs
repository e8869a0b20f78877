//! Executors registering and beating, executor groups, and the secret run
//! receipts are signed with.

use super::*;
use std::collections::HashSet;

use cronbox_api::LegacyProtocol;
use rows::{decode, decode_optional};

/// How loaded an executor said it was in its last heartbeat (each `None`
/// when it did not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecutorLoad {
    /// Runs executing.
    pub busy: Option<i64>,
    /// Free instance slots.
    pub free_slots: Option<i64>,
}

/// The credential an executor registered with: an enrolled one (its id,
/// and what admins present to the executor), or the shared token (both
/// `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisteredWith {
    pub credential_id: Option<i64>,
    pub admin_proof: Option<String>,
}

/// A configured executor group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRow {
    pub name: String,
    /// `AUTO` or `MANUAL`.
    pub address_type: String,
    /// A MANUAL group's addresses, in order.
    pub addresses: Vec<String>,
    /// The tenants granted the group (`*`: every tenant).
    pub tenants: Vec<String>,
    /// A legacy group's protocol (its executors are xxl-job's).
    pub legacy: Option<LegacyProtocol>,
}

/// What the admin needs to talk to a legacy group's executors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyGroup {
    pub protocol: LegacyProtocol,
    /// The access token they and the admin present.
    pub token: String,
}

/// A registered executor as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredExecutor {
    pub group: String,
    pub address: String,
    pub last_beat_ms: i64,
    pub load: ExecutorLoad,
}

impl Store {
    /// Records a heartbeat of `address` in `group`, with the load it
    /// reported.
    pub async fn registry_beat(
        &self,
        group: &str,
        address: &str,
        load: ExecutorLoad,
        credential: &RegisteredWith,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO registry (group_name, address, updated_at_ms, busy, free_slots, \
             credential_id, admin_proof) VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (group_name, address) DO UPDATE SET \
             updated_at_ms = excluded.updated_at_ms, busy = excluded.busy, \
             free_slots = excluded.free_slots, credential_id = excluded.credential_id, \
             admin_proof = excluded.admin_proof",
        )
        .bind(group)
        .bind(address)
        .bind(now_ms)
        .bind(load.busy)
        .bind(load.free_slots)
        .bind(credential.credential_id)
        .bind(&credential.admin_proof)
        .execute(&self.writer)
        .await?;
        // An executor registering in a group makes it known (AUTO).
        sqlx::query(
            "INSERT INTO executor_group (name, address_type) VALUES ($1, 'AUTO') \
             ON CONFLICT (tenant, name) DO NOTHING",
        )
        .bind(group)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Every registered executor, by group and address.
    pub async fn registered_executors(&self) -> Result<Vec<RegisteredExecutor>, StoreError> {
        Ok(sqlx::query(
            "SELECT group_name, address, updated_at_ms, busy, free_slots FROM registry \
             ORDER BY group_name, address",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| {
            Ok(RegisteredExecutor {
                group: row.try_get("group_name")?,
                address: row.try_get("address")?,
                last_beat_ms: row.try_get("updated_at_ms")?,
                load: ExecutorLoad {
                    busy: row.try_get("busy")?,
                    free_slots: row.try_get("free_slots")?,
                },
            })
        })
        .collect::<Result<_, sqlx::Error>>()?)
    }

    /// Whether executor group `name` is known: configured by the operator
    /// or registered in by an executor.
    pub async fn group_exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("SELECT 1 AS known FROM executor_group WHERE name = $1")
                .bind(name)
                .fetch_optional(&self.pool)
                .await?
                .is_some(),
        )
    }

    /// The secret every admin of this database signs run receipts with,
    /// made by the first admin that asks.
    pub async fn receipt_key(&self) -> Result<Vec<u8>, StoreError> {
        let fresh = hex::encode(rand::random::<[u8; 32]>());
        sqlx::query(
            "INSERT INTO admin_secret (name, value) VALUES ('run_receipts', $1) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(&fresh)
        .execute(&self.writer)
        .await?;
        let stored: String =
            sqlx::query("SELECT value FROM admin_secret WHERE name = 'run_receipts'")
                .fetch_one(&self.writer)
                .await?
                .try_get("value")?;
        Ok(stored.into_bytes())
    }

    /// Forgets `address` in `group`.
    pub async fn registry_remove(&self, group: &str, address: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM registry WHERE group_name = $1 AND address = $2")
            .bind(group)
            .bind(address)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// The addresses of `group`, sorted: its manual list if it has one,
    /// else the executors that beat since `alive_since_ms`.
    pub async fn group_addresses(
        &self,
        group: &str,
        alive_since_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        let kind: Option<String> =
            sqlx::query("SELECT address_type FROM executor_group WHERE name = $1")
                .bind(group)
                .fetch_optional(&self.pool)
                .await?
                .map(|row| row.try_get("address_type"))
                .transpose()?;
        if kind.as_deref() == Some("MANUAL") {
            return Ok(sqlx::query(
                "SELECT a.address AS address FROM group_address a \
                 JOIN executor_group g ON g.id = a.group_id WHERE g.name = $1 ORDER BY a.position",
            )
            .bind(group)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| row.try_get("address"))
            .collect::<Result<_, _>>()?);
        }
        let mut addresses: Vec<String> = sqlx::query(
            "SELECT address FROM registry WHERE group_name = $1 AND updated_at_ms >= $2",
        )
        .bind(group)
        .bind(alive_since_ms)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| row.try_get("address"))
        .collect::<Result<_, sqlx::Error>>()?;
        addresses.sort();
        Ok(addresses)
    }

    /// Creates or replaces an executor group: `AUTO` (addresses from the
    /// registry) or `MANUAL` (the given addresses).
    pub async fn put_group(
        &self,
        name: &str,
        address_type: &str,
        addresses: &[String],
        legacy: Option<&LegacyGroup>,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        let group_id: i64 = sqlx::query(
            "INSERT INTO executor_group (name, address_type, legacy_protocol, legacy_token) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (tenant, name) DO UPDATE SET address_type = excluded.address_type, \
             legacy_protocol = excluded.legacy_protocol, legacy_token = excluded.legacy_token \
             RETURNING id",
        )
        .bind(name)
        .bind(address_type)
        .bind(legacy.map(|legacy| legacy.protocol.as_str()))
        .bind(legacy.map(|legacy| legacy.token.clone()))
        .fetch_one(&mut *tx)
        .await?
        .try_get("id")?;
        sqlx::query("DELETE FROM group_address WHERE group_id = $1")
            .bind(group_id)
            .execute(&mut *tx)
            .await?;
        for (position, address) in addresses.iter().enumerate() {
            sqlx::query(
                "INSERT INTO group_address (group_id, position, address) VALUES ($1, $2, $3) \
                 ON CONFLICT (group_id, address) DO NOTHING",
            )
            .bind(group_id)
            .bind(position as i64)
            .bind(address)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Every configured group, by name.
    pub async fn groups(&self) -> Result<Vec<GroupRow>, StoreError> {
        let mut addresses: HashMap<i64, Vec<String>> = HashMap::new();
        for row in sqlx::query("SELECT group_id, address FROM group_address ORDER BY position")
            .fetch_all(&self.pool)
            .await?
        {
            addresses
                .entry(row.try_get("group_id")?)
                .or_default()
                .push(row.try_get("address")?);
        }
        let mut tenants: HashMap<String, Vec<String>> = HashMap::new();
        for row in sqlx::query("SELECT group_name, tenant FROM group_tenant ORDER BY tenant")
            .fetch_all(&self.pool)
            .await?
        {
            tenants
                .entry(row.try_get("group_name")?)
                .or_default()
                .push(row.try_get("tenant")?);
        }
        Ok(sqlx::query(
            "SELECT id, name, address_type, legacy_protocol FROM executor_group ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| {
            let id: i64 = row.try_get("id")?;
            let name: String = row.try_get("name")?;
            Ok(GroupRow {
                tenants: tenants.remove(&name).unwrap_or_default(),
                name,
                address_type: row.try_get("address_type")?,
                addresses: addresses.remove(&id).unwrap_or_default(),
                legacy: decode_optional(row, "legacy_protocol")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()?)
    }

    /// How many jobs are in group `name`.
    pub async fn jobs_in_group(&self, name: &str) -> Result<i64, StoreError> {
        Ok(
            sqlx::query("SELECT COUNT(*) AS jobs FROM job WHERE group_name = $1")
                .bind(name)
                .fetch_one(&self.pool)
                .await?
                .try_get("jobs")?,
        )
    }

    /// The names of every legacy group.
    pub async fn legacy_group_names(&self) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT name FROM executor_group WHERE legacy_protocol IS NOT NULL ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Group `name`'s protocol and token if it is a legacy group.
    pub async fn legacy_group(&self, name: &str) -> Result<Option<LegacyGroup>, StoreError> {
        let row = sqlx::query(
            "SELECT legacy_protocol, legacy_token FROM executor_group \
             WHERE name = $1 AND legacy_protocol IS NOT NULL",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let token: String = row
            .try_get::<Option<String>, _>("legacy_token")?
            .filter(|token| !token.is_empty())
            .ok_or_else(|| sqlx::Error::ColumnDecode {
                index: "legacy_token".to_owned(),
                source: "a legacy group without its token".into(),
            })?;
        Ok(Some(LegacyGroup {
            protocol: decode(&row, "legacy_protocol")?,
            token,
        }))
    }

    /// Marks legacy run `run` as being killed (`0025_legacy_kills.sql`).
    pub async fn mark_legacy_kill(&self, run: RunId, now_ms: i64) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO legacy_kill (run_id, requested_at_ms) VALUES ($1, $2) \
             ON CONFLICT (run_id) DO NOTHING",
        )
        .bind(run)
        .bind(now_ms)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Which of `runs` some admin is killing.
    pub async fn legacy_kills(&self, runs: &[RunId]) -> Result<HashSet<RunId>, StoreError> {
        if runs.is_empty() {
            return Ok(HashSet::new());
        }
        let sql = format!(
            "SELECT run_id FROM legacy_kill WHERE run_id IN ({})",
            self.backend.ids_in(1)
        );
        let marked: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(json_text("rows", runs)?)
            .fetch_all(&self.pool)
            .await?;
        Ok(marked.into_iter().map(RunId).collect())
    }

    /// Forgets the kill of legacy run `run` once it has been answered.
    pub async fn forget_legacy_kill(&self, run: RunId) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM legacy_kill WHERE run_id = $1")
            .bind(run)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Whether `tenant` may put jobs in group `group`: the operator's own
    /// tenant any group, another one a group granted to it or to every
    /// tenant (`*`).
    pub async fn group_granted(&self, group: &str, tenant: &str) -> Result<bool, StoreError> {
        if tenant == cronbox_api::DEFAULT_TENANT {
            return Ok(true);
        }
        Ok(sqlx::query(
            "SELECT 1 AS granted FROM group_tenant WHERE group_name = $1 \
             AND (tenant = $2 OR tenant = '*')",
        )
        .bind(group)
        .bind(tenant)
        .fetch_optional(&self.pool)
        .await?
        .is_some())
    }

    /// Replaces the tenants that may use group `group` (`*`: every tenant).
    pub async fn set_group_tenants(
        &self,
        group: &str,
        tenants: &[String],
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM group_tenant WHERE group_name = $1")
            .bind(group)
            .execute(&mut *tx)
            .await?;
        for tenant in tenants {
            sqlx::query(
                "INSERT INTO group_tenant (group_name, tenant) VALUES ($1, $2) \
                 ON CONFLICT (group_name, tenant) DO NOTHING",
            )
            .bind(group)
            .bind(tenant)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The instant executor liveness is measured from: now, or the newest
    /// heartbeat recorded if that is older. When heartbeats could not be
    /// recorded at all (the database was away), executors do not all look
    /// dead afterwards; one that stopped while others beat still does.
    pub async fn liveness_reference(&self, now_ms: i64) -> Result<i64, StoreError> {
        let newest: Option<i64> = sqlx::query("SELECT MAX(updated_at_ms) AS newest FROM registry")
            .fetch_one(&self.pool)
            .await?
            .try_get("newest")?;
        Ok(newest.map_or(now_ms, |newest| newest.min(now_ms)))
    }

    /// Whether `address` beat since `alive_since_ms` in any group.
    pub async fn is_alive(&self, address: &str, alive_since_ms: i64) -> Result<bool, StoreError> {
        let row =
            sqlx::query("SELECT 1 AS one FROM registry WHERE address = $1 AND updated_at_ms >= $2")
                .bind(address)
                .bind(alive_since_ms)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.is_some())
    }

    /// Forgets executors that have not beaten since `before_ms`.
    pub async fn forget_silent_executors(&self, before_ms: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM registry WHERE updated_at_ms < $1")
            .bind(before_ms)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }
}
