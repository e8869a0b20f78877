//! Listing runs by filter and page: conditions that select through an
//! index first, then narrow, each bounded to the newest runs it may read.

use std::collections::HashMap;

use super::rows::{decode, decode_optional};
use super::*;

/// A value a run filter's condition binds.
pub(super) enum Bound {
    Text(String),
    Number(i64),
}

/// A run filter's conditions, each with the value it binds: those that
/// select runs through an index (tenant, job, cursor, an open status),
/// then those that narrow what they select (group, another status, kind,
/// scheduled time). Each `?` becomes its placeholder, numbered from `$1`
/// in that order, the order [`bind_all`] binds them in.
pub(super) struct RunConditions {
    selecting: Vec<(String, Bound)>,
    narrowing: Vec<(String, Bound)>,
}

impl RunConditions {
    fn of(filter: &RunFilter) -> RunConditions {
        let mut selecting = Vec::new();
        if let Some(tenant) = &filter.tenant {
            selecting.push(("tenant = ?", Bound::Text(tenant.clone())));
        }
        if let Some(job_id) = filter.job_id {
            selecting.push(("job_id = ?", Bound::Number(job_id.0)));
        }
        if let Some(before) = filter.before_id {
            selecting.push(("id < ?", Bound::Number(before.0)));
        }
        // Runs still open are few and indexed (`run_by_status`, partial:
        // its condition is repeated for the planners): they select; any
        // other status narrows.
        let (open, closed) = match filter.status {
            Some(status) if status.is_open() => (Some(status), None),
            other => (None, other),
        };
        if let Some(status) = open {
            selecting.push((
                "status IN ('pending', 'dispatched') AND status = ?",
                Bound::Text(status.as_str().to_owned()),
            ));
        }
        let mut narrowing = Vec::new();
        if let Some(group) = &filter.group {
            narrowing.push((
                "job_id IN (SELECT id FROM job WHERE group_name = ?)",
                Bound::Text(group.clone()),
            ));
        }
        if let Some(status) = closed {
            narrowing.push(("status = ?", Bound::Text(status.as_str().to_owned())));
        }
        if let Some(kind) = filter.kind {
            narrowing.push(("kind = ?", Bound::Text(kind.as_str().to_owned())));
        }
        if let Some(from) = filter.from_ms {
            narrowing.push(("scheduled_at_ms >= ?", Bound::Number(from)));
        }
        if let Some(to) = filter.to_ms {
            narrowing.push(("scheduled_at_ms < ?", Bound::Number(to)));
        }
        let mut next = 0;
        let mut number = |conditions: Vec<(&str, Bound)>| -> Vec<(String, Bound)> {
            conditions
                .into_iter()
                .map(|(text, value)| {
                    next += 1;
                    (text.replace('?', &format!("${next}")), value)
                })
                .collect()
        };
        let selecting = number(selecting);
        let narrowing = number(narrowing);
        RunConditions {
            selecting,
            narrowing,
        }
    }

    /// How many placeholders the conditions use.
    fn len(&self) -> usize {
        self.selecting.len() + self.narrowing.len()
    }
}

/// ` WHERE a AND b ...`, or nothing for no conditions.
pub(super) fn where_all<'a>(conditions: impl IntoIterator<Item = &'a (String, Bound)>) -> String {
    let texts: Vec<&str> = conditions
        .into_iter()
        .map(|(text, _)| text.as_str())
        .collect();
    if texts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", texts.join(" AND "))
    }
}

/// The ids of the `$limit` newest runs the selecting conditions choose, as
/// a subquery (read from an index, or the table's ids, alone).
pub(super) fn newest_ids(conditions: &RunConditions, limit: usize) -> String {
    format!(
        "(SELECT id FROM run{} ORDER BY id DESC LIMIT ${limit}) AS window_runs",
        where_all(&conditions.selecting)
    )
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// Binds the values of `conditions`, in their placeholders' order.
pub(super) fn bind_all<'q, 'a>(
    mut query: AnyQuery<'q>,
    conditions: impl IntoIterator<Item = &'a (String, Bound)>,
) -> AnyQuery<'q> {
    for (_, value) in conditions {
        query = match value {
            Bound::Text(text) => query.bind(text.clone()),
            Bound::Number(number) => query.bind(*number),
        };
    }
    query
}

impl Store {
    /// Runs matching `filter`, newest first, at most `filter.limit`; with
    /// `filter.examine`, found among that many of the newest runs the
    /// tenant, job and cursor select (see [`Store::oldest_examined`]).
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let conditions = RunConditions::of(filter);
        let window = filter.examine.filter(|_| !conditions.narrowing.is_empty());
        let all = conditions.selecting.iter().chain(&conditions.narrowing);
        // Only placeholders and fixed column names go into the text.
        let sql = match window {
            // The window's oldest id comes from an index (or the table's
            // ids) alone; then the runs are read newest first, down to it
            // at most, and the read stops at the page's limit.
            Some(_) => format!(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM run{} id >= (SELECT COALESCE(MIN(id), 0) FROM {}) \
                     ORDER BY id DESC LIMIT ${}"
                ),
                where_all(all.clone()) + " AND",
                newest_ids(&conditions, conditions.len() + 1),
                conditions.len() + 2,
            ),
            None => format!(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM run{} ORDER BY id DESC LIMIT ${}"
                ),
                where_all(all.clone()),
                conditions.len() + 1,
            ),
        };
        let mut query = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), all);
        if let Some(examine) = window {
            query = query.bind(examine);
        }
        let rows = query.bind(filter.limit).fetch_all(&self.pool).await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Where the next page of `filter` begins when [`Store::list_runs`]
    /// returned fewer than `filter.limit` runs because it examined its
    /// `filter.examine` newest: the oldest run examined (the next page's
    /// cursor). `None` when every run was examined, or nothing bounded
    /// the page.
    pub async fn oldest_examined(&self, filter: &RunFilter) -> Result<Option<RunId>, StoreError> {
        let conditions = RunConditions::of(filter);
        let Some(examine) = filter.examine.filter(|_| !conditions.narrowing.is_empty()) else {
            return Ok(None);
        };
        // Only placeholders go into the text.
        let sql = format!(
            "SELECT CAST(MIN(id) AS BIGINT) AS oldest, CAST(COUNT(*) AS BIGINT) AS examined \
             FROM {}",
            newest_ids(&conditions, conditions.selecting.len() + 1),
        );
        let row = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), &conditions.selecting)
            .bind(examine)
            .fetch_one(&self.pool)
            .await?;
        let examined: i64 = row.try_get("examined")?;
        Ok(if examined >= examine {
            row.try_get::<Option<RunId>, _>("oldest")?
        } else {
            None
        })
    }
}

impl Store {
    /// `runs` with their jobs' names (one query for the page; a deleted
    /// job's runs stay without).
    pub async fn with_job_names(&self, runs: &mut [RunRow]) -> Result<(), StoreError> {
        let mut ids: Vec<JobId> = runs.iter().map(|run| run.job_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut names = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(IN_LIST_CHUNK) {
            let sql = format!(
                "SELECT id, name FROM job WHERE id IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(*id);
            }
            for row in query.fetch_all(&self.pool).await? {
                names.insert(
                    row.try_get::<JobId, _>("id")?,
                    row.try_get::<String, _>("name")?,
                );
            }
        }
        for run in runs {
            run.job_name = names.get(&run.job_id).cloned();
        }
        Ok(())
    }

    /// The last run that was due (scheduled at or before `now_ms`) of each
    /// of `jobs` that has one: one index step back per job (`run_by_job`),
    /// however many runs it has.
    pub async fn last_runs(
        &self,
        jobs: &[JobId],
        now_ms: i64,
    ) -> Result<HashMap<JobId, cronbox_api::LastRun>, StoreError> {
        let mut last = HashMap::with_capacity(jobs.len());
        for chunk in jobs.chunks(IN_LIST_CHUNK) {
            let sql = format!(
                "SELECT id, job_id, status, outcome, scheduled_at_ms, finished_at_ms FROM run \
                 WHERE id IN (SELECT (SELECT r.id FROM run r WHERE r.job_id = job.id \
                 AND r.scheduled_at_ms <= $1 ORDER BY r.id DESC LIMIT 1) FROM job \
                 WHERE job.id IN ({}))",
                (2..chunk.len() + 2)
                    .map(|n| format!("${n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now_ms);
            for id in chunk {
                query = query.bind(*id);
            }
            for row in query.fetch_all(&self.pool).await? {
                let job_id: JobId = row.try_get("job_id")?;
                last.insert(
                    job_id,
                    cronbox_api::LastRun {
                        id: row.try_get("id")?,
                        status: decode(&row, "status")?,
                        outcome: decode_optional(&row, "outcome")?,
                        scheduled_at_ms: row.try_get("scheduled_at_ms")?,
                        finished_at_ms: row.try_get("finished_at_ms")?,
                    },
                );
            }
        }
        Ok(last)
    }
}
