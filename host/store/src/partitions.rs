//! The run table's partitions on PostgreSQL: one per UTC day of scheduled
//! time, made a few days ahead and dropped whole once every run in them is
//! past its retention, so that retention at tens of millions of runs a day
//! is a `DROP TABLE` instead of as many row deletes (migration 0018 lays
//! the table out). Runs of a day without a partition go to `run_default`.
//! On SQLite the run table is one table and these are no-ops: retention
//! deletes in batches there (`history.rs`).
//!
//! Partition changes lock the run table for a moment, so each waits at
//! most [`PARTITION_LOCK_TIMEOUT`] for the lock (trying again on the next
//! pass rather than stalling every query queued behind it), and one admin
//! at a time makes them (a transaction-scoped advisory lock; the others
//! skip the pass).

use super::*;

/// How long a partition change waits for its lock on the run table.
pub const PARTITION_LOCK_TIMEOUT: &str = "2s";

/// The advisory lock that one admin at a time holds while it changes the
/// run table's partitions (an arbitrary number, the same in every admin).
const PARTITIONS_LOCK: i64 = 0x6372_6f6e_7061_7274;

/// The range of scheduled times one partition holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPartition {
    pub name: String,
    /// Its first scheduled time; `None`: unbounded below (the partition of
    /// runs written before the table was partitioned), or the default
    /// partition.
    pub from_ms: Option<i64>,
    /// The end of its range (exclusive); `None`: unbounded above, or the
    /// default partition.
    pub to_ms: Option<i64>,
    /// The default partition: runs of a day that has no partition.
    pub is_default: bool,
}

impl RunPartition {
    /// Whether its range shares a scheduled time with `[from_ms, to_ms)`.
    fn overlaps(&self, from_ms: i64, to_ms: i64) -> bool {
        !self.is_default
            && self.from_ms.is_none_or(|start| start < to_ms)
            && self.to_ms.is_none_or(|end| from_ms < end)
    }
}

/// What one pass over the partitions changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionChanges {
    pub created: Vec<String>,
    pub dropped: Vec<String>,
}

/// A day partition's name: `run_d` and its UTC date (`run_d20261125`).
fn day_partition_name(day: i64) -> String {
    let date = chrono::DateTime::from_timestamp_millis(day.saturating_mul(DAY_MS))
        .unwrap_or_default()
        .format("%Y%m%d");
    format!("run_d{date}")
}

/// A range bound as `pg_get_expr` writes it: `MINVALUE`, `MAXVALUE` (no
/// bound) or a quoted number.
fn parse_bound(bound: &str) -> Option<i64> {
    bound.trim().trim_matches('\'').parse().ok()
}

/// The bounds of `FOR VALUES FROM (a) TO (b)`, or `None` for `DEFAULT`.
fn parse_range(expression: &str) -> Option<(Option<i64>, Option<i64>)> {
    let rest = expression.strip_prefix("FOR VALUES FROM (")?;
    let (from, rest) = rest.split_once(") TO (")?;
    let to = rest.strip_suffix(')')?;
    Some((parse_bound(from), parse_bound(to)))
}

/// A table name from PostgreSQL's catalog, quoted as an identifier for
/// the statements that name it.
fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Store {
    /// The run table's partitions (none on SQLite), in no order.
    pub async fn run_partitions(&self) -> Result<Vec<RunPartition>, StoreError> {
        if self.backend != Backend::Postgres {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT child.relname::text AS name, \
             pg_get_expr(child.relpartbound, child.oid)::text AS bound \
             FROM pg_inherits JOIN pg_class child ON child.oid = pg_inherits.inhrelid \
             WHERE pg_inherits.inhparent = 'run'::regclass",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let name: String = row.try_get("name")?;
                let bound: String = row.try_get("bound")?;
                Ok(match parse_range(&bound) {
                    Some((from_ms, to_ms)) => RunPartition {
                        name,
                        from_ms,
                        to_ms,
                        is_default: false,
                    },
                    None => RunPartition {
                        name,
                        from_ms: None,
                        to_ms: None,
                        is_default: true,
                    },
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Makes the day partitions of today (UTC, by `now_ms`) and of the
    /// `days_ahead` days after it that no partition covers yet, then drops
    /// (detaches under the run table's lock, then deletes without it)
    /// each partition whose scheduled times all lie before `expired_before_ms`
    /// and whose runs were all written before it and have all ended (a
    /// run written late into an old day, a backfill say, keeps its day
    /// until it has aged out too). Nothing on SQLite, or when another admin
    /// is at it. A day whose runs already sit in the default partition
    /// gets no partition (they stay where they are; retention deletes them
    /// in batches).
    pub async fn maintain_run_partitions(
        &self,
        now_ms: i64,
        days_ahead: i64,
        expired_before_ms: i64,
    ) -> Result<PartitionChanges, StoreError> {
        let mut changes = PartitionChanges::default();
        if self.backend != Backend::Postgres {
            return Ok(changes);
        }
        let mut tx = self.writer.begin().await?;
        let ours: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
            .bind(PARTITIONS_LOCK)
            .fetch_one(&mut *tx)
            .await?;
        if !ours {
            return Ok(changes);
        }
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SET LOCAL lock_timeout = '{PARTITION_LOCK_TIMEOUT}'"
        )))
        .execute(&mut *tx)
        .await?;
        let partitions = self.run_partitions().await?;
        let today = now_ms.div_euclid(DAY_MS);
        for day in today..=today + days_ahead.max(0) {
            let (from_ms, to_ms) = (day * DAY_MS, (day + 1) * DAY_MS);
            if partitions
                .iter()
                .any(|partition| partition.overlaps(from_ms, to_ms))
            {
                continue;
            }
            let name = day_partition_name(day);
            // Each in a savepoint: a day whose runs sit in the default
            // partition is refused by PostgreSQL, and the pass goes on.
            let mut savepoint = sqlx::Connection::begin(&mut *tx).await?;
            // Only a name made of a date and two numbers go into the text.
            let made = sqlx::query(sqlx::AssertSqlSafe(format!(
                "CREATE TABLE {name} PARTITION OF run FOR VALUES FROM ({from_ms}) TO ({to_ms})"
            )))
            .execute(&mut *savepoint)
            .await;
            match made {
                Ok(_) => {
                    savepoint.commit().await?;
                    changes.created.push(name);
                }
                Err(error) => {
                    savepoint.rollback().await?;
                    tracing::warn!(partition = %name, %error, "run partition not made");
                }
            }
        }
        for partition in &partitions {
            let Some(to_ms) = partition.to_ms else {
                continue;
            };
            if partition.is_default || to_ms > expired_before_ms {
                continue;
            }
            let name = &partition.name;
            let quoted = quote_identifier(name);
            // Two lookups, each through its index (an OR of the two would
            // read the whole partition).
            let blocker = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT 1 FROM {quoted} WHERE status IN ('pending', 'dispatched') \
                 AND status IN ($1, $2) \
                 UNION ALL SELECT 1 FROM {quoted} WHERE created_at_ms >= $3 LIMIT 1"
            )))
            .bind(RunStatus::Pending.as_str())
            .bind(RunStatus::Dispatched.as_str())
            .bind(expired_before_ms)
            .fetch_optional(&mut *tx)
            .await?;
            if blocker.is_some() {
                continue;
            }
            // Detached under the run table's lock (a change to the
            // catalog); its files are deleted after, without that lock
            // (deleting a gigabyte takes a quarter of a second).
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "ALTER TABLE run DETACH PARTITION {quoted}"
            )))
            .execute(&mut *tx)
            .await?;
            changes.dropped.push(name.clone());
        }
        tx.commit().await?;
        self.drop_detached_run_partitions().await?;
        Ok(changes)
    }

    /// Drops the tables that were run partitions and are detached: those
    /// of the pass that just ran, and any an admin that stopped between
    /// detaching and dropping left behind.
    async fn drop_detached_run_partitions(&self) -> Result<(), StoreError> {
        let detached: Vec<String> = sqlx::query_scalar(
            "SELECT relname::text FROM pg_class WHERE relkind = 'r' AND NOT relispartition \
             AND relnamespace = 'public'::regnamespace \
             AND (relname ~ '^run_d[0-9]{8}$' OR relname = 'run_before_partitions')",
        )
        .fetch_all(&self.writer)
        .await?;
        for name in detached {
            let quoted = quote_identifier(&name);
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP TABLE IF EXISTS {quoted}"
            )))
            .execute(&self.writer)
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_bounds_read_as_postgres_writes_them() {
        assert_eq!(
            parse_range("FOR VALUES FROM (MINVALUE) TO ('1795651200000')"),
            Some((None, Some(1_795_651_200_000)))
        );
        assert_eq!(
            parse_range("FOR VALUES FROM ('86400000') TO ('172800000')"),
            Some((Some(86_400_000), Some(172_800_000)))
        );
        assert_eq!(parse_range("DEFAULT"), None);
    }

    #[test]
    fn a_day_partition_is_named_by_its_utc_date() {
        assert_eq!(day_partition_name(20_417), "run_d20251125");
        assert_eq!(day_partition_name(0), "run_d19700101");
    }

    #[test]
    fn overlap_counts_unbounded_ends_and_never_the_default() {
        let before = RunPartition {
            name: "run_before_partitions".into(),
            from_ms: None,
            to_ms: Some(2 * DAY_MS),
            is_default: false,
        };
        assert!(before.overlaps(DAY_MS, 2 * DAY_MS));
        assert!(!before.overlaps(2 * DAY_MS, 3 * DAY_MS));
        let default = RunPartition {
            name: "run_default".into(),
            from_ms: None,
            to_ms: None,
            is_default: true,
        };
        assert!(!default.overlaps(0, DAY_MS));
    }
}
