//! Job definitions: inserting, updating, reading, listing and deleting
//! them, their children, starting, stopping and pausing them. Claims
//! are `claims`', durable state `job_states`'.

use super::job_definition::{INSERT_JOB, UPDATE_JOB, bind_definition};
use super::*;

/// New jobs written in one transaction, all or none: each inserted with
/// its child links, started at a first fire its caller works out from the
/// new id, then all committed together (dropped uncommitted, none is
/// kept). The transaction holds the writer, so a caller does between two
/// calls only what needs no other store call (SQLite has one writer).
#[derive(Debug)]
pub struct JobInserts {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    now_ms: i64,
    ids: Vec<JobId>,
}

impl JobInserts {
    /// Inserts a validated job and its child links; its id.
    pub async fn insert(&mut self, job: &JobRow) -> Result<JobId, StoreError> {
        let id = insert_job_row(&mut self.tx, job, self.now_ms).await?;
        // A new job cannot close a cycle: nothing names it yet.
        add_children(&mut self.tx, id, &job.children).await?;
        self.ids.push(id);
        Ok(id)
    }

    /// Starts job `id`, just inserted, with its first fire at `first_ms`.
    pub async fn start(&mut self, id: JobId, first_ms: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE job SET enabled = 1, next_fire_at_ms = $1 WHERE id = $2")
            .bind(first_ms)
            .bind(id)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Commits every job inserted: their ids in order.
    pub async fn commit(self) -> Result<Vec<JobId>, StoreError> {
        self.tx.commit().await?;
        Ok(self.ids)
    }
}

impl Store {
    /// Inserts a validated job; returns its id.
    pub async fn insert_job(&self, job: &JobRow, now_ms: i64) -> Result<JobId, StoreError> {
        let mut inserts = self.job_inserts(now_ms).await?;
        inserts.insert(job).await?;
        Ok(inserts.commit().await?[0])
    }

    /// A transaction of new jobs ([`JobInserts`]), created at `now_ms`.
    pub async fn job_inserts(&self, now_ms: i64) -> Result<JobInserts, StoreError> {
        Ok(JobInserts {
            tx: self.writer.begin().await?,
            now_ms,
            ids: Vec::new(),
        })
    }

    /// Replaces a job's definition (keeping whether it is enabled); its next
    /// fire is `next_fire_at_ms`. Its children are checked for a cycle in
    /// the same transaction, after every other writer of child links
    /// (SQLite's single writer; a transaction lock on PostgreSQL), so two
    /// concurrent updates cannot close a cycle between them.
    pub async fn update_job(
        &self,
        id: JobId,
        job: &JobRow,
        next_fire_at_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(CHILD_LINKS_LOCK)
                .execute(&mut *tx)
                .await?;
        }
        let done = bind_definition(sqlx::query(UPDATE_JOB.as_str()), job)?
            .bind(next_fire_at_ms)
            .bind(now_ms)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        write_children(&mut tx, id, &job.children).await?;
        if closes_cycle(&mut tx, id).await? {
            tx.rollback().await?;
            return Err(StoreError::ChildCycle(id));
        }
        tx.commit().await?;
        Ok(true)
    }

    /// A job by id.
    pub async fn job(&self, id: JobId) -> Result<Option<JobRow>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM job WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let mut jobs: Vec<JobRow> = row
            .as_ref()
            .map(job_from_row)
            .transpose()?
            .into_iter()
            .collect();
        attach_children(&mut *self.pool.acquire().await?, self.backend, &mut jobs).await?;
        Ok(jobs.pop())
    }

    /// The job of group `group` whose xxl-job id is `xxl_job_id`.
    pub async fn job_by_xxl_id(
        &self,
        group: &str,
        xxl_job_id: i64,
    ) -> Result<Option<JobRow>, StoreError> {
        let id: Option<JobId> =
            sqlx::query_scalar("SELECT id FROM job WHERE group_name = $1 AND xxl_job_id = $2")
                .bind(group.to_owned())
                .bind(xxl_job_id)
                .fetch_optional(&self.pool)
                .await?;
        match id {
            Some(id) => self.job(id).await,
            None => Ok(None),
        }
    }

    /// The jobs that have one of `xxl_job_ids`: each one's group, xxl-job
    /// id and id (in chunks of bound parameters).
    pub async fn jobs_with_xxl_ids(
        &self,
        xxl_job_ids: &[i64],
    ) -> Result<Vec<(String, i64, JobId)>, StoreError> {
        let mut found = Vec::new();
        for chunk in xxl_job_ids.chunks(500) {
            let sql = format!(
                "SELECT group_name, xxl_job_id, id FROM job WHERE xxl_job_id IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query_as::<_, (String, i64, JobId)>(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(*id);
            }
            found.extend(query.fetch_all(&self.pool).await?);
        }
        Ok(found)
    }

    /// The xxl-job id a new job of group `group` takes: one past the
    /// largest there, and past the largest job id (so that it names no
    /// other job of the group by its cronbox id either).
    pub async fn next_xxl_job_id(&self, group: &str) -> Result<i64, StoreError> {
        let largest_xxl: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(MAX(xxl_job_id), 0) AS BIGINT) FROM job WHERE group_name = $1",
        )
        .bind(group.to_owned())
        .fetch_one(&self.pool)
        .await?;
        let largest_id: i64 =
            sqlx::query_scalar("SELECT CAST(COALESCE(MAX(id), 0) AS BIGINT) FROM job")
                .fetch_one(&self.pool)
                .await?;
        Ok(largest_xxl.max(largest_id) + 1)
    }

    /// The jobs among `ids` that exist: each job's revision and next fire
    /// in one query, then, in another, the whole rows of those not kept at
    /// that revision (see `job_cache`).
    pub async fn jobs_by_id(&self, ids: &[JobId]) -> Result<HashMap<JobId, JobRow>, StoreError> {
        let mut found = HashMap::with_capacity(ids.len());
        if ids.is_empty() {
            return Ok(found);
        }
        let sql = format!(
            "SELECT id, revision, next_fire_at_ms FROM job WHERE id IN ({})",
            self.backend.ids_in(1)
        );
        let mut unkept = Vec::new();
        for row in sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(json_text("rows", ids)?)
            .fetch_all(&self.pool)
            .await?
        {
            let id: JobId = row.try_get("id")?;
            match self.jobs.get(id, row.try_get("revision")?) {
                Some(mut job) => {
                    job.next_fire_at_ms = row.try_get("next_fire_at_ms")?;
                    found.insert(id, job);
                }
                None => unkept.push(id),
            }
        }
        if unkept.is_empty() {
            return Ok(found);
        }
        let sql = format!(
            concat!(
                "SELECT ",
                job_columns!(),
                ", revision FROM job WHERE id IN ({})"
            ),
            self.backend.ids_in(1)
        );
        let mut read = Vec::with_capacity(unkept.len());
        let mut revisions = Vec::with_capacity(unkept.len());
        for row in sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(json_text("rows", &unkept)?)
            .fetch_all(&self.pool)
            .await?
        {
            read.push(job_from_row(&row)?);
            revisions.push(row.try_get::<i64, _>("revision")?);
        }
        // Children read after the row are as new as it or newer: a row kept
        // with newer children than its revision says is read again at the
        // next check, never served stale.
        attach_children(&mut *self.pool.acquire().await?, self.backend, &mut read).await?;
        for (job, revision) in read.into_iter().zip(revisions) {
            self.jobs.put(&job, revision);
            found.insert(job.id, job);
        }
        Ok(found)
    }

    /// The jobs of `tenant` named exactly `name` (names are not unique:
    /// callers that need one job refuse two).
    pub async fn jobs_named(&self, tenant: &str, name: &str) -> Result<Vec<JobRow>, StoreError> {
        self.list_jobs(&JobFilter {
            tenant: Some(tenant.to_owned()),
            name: Some(name.to_owned()),
            limit: 2,
            ..JobFilter::default()
        })
        .await
    }

    /// A page of jobs by `filter`, in id order (an indexed read of one
    /// page, never of the whole table).
    pub async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<JobRow>, StoreError> {
        let mut sql = String::from(concat!("SELECT ", job_columns!(), " FROM job WHERE 1 = 1"));
        let mut n = 0;
        let mut next = || {
            n += 1;
            n
        };
        if filter.tenant.is_some() {
            sql.push_str(&format!(" AND tenant = ${}", next()));
        }
        if filter.group.is_some() {
            sql.push_str(&format!(" AND group_name = ${}", next()));
        }
        if filter.name.is_some() {
            sql.push_str(&format!(" AND name = ${}", next()));
        }
        if filter.search.is_some() {
            sql.push_str(&format!(" AND LOWER(name) LIKE ${} ESCAPE '\\'", next()));
        }
        // SQLite: the trigram index finds the few jobs a search can match
        // (PostgreSQL's serves the LIKE itself).
        let by_trigrams = self.backend == Backend::Sqlite
            && filter
                .search
                .as_ref()
                .is_some_and(|search| search.chars().count() >= 3);
        if by_trigrams {
            sql.push_str(&format!(
                " AND id IN (SELECT rowid FROM job_name_search WHERE job_name_search MATCH ${})",
                next()
            ));
        }
        if filter.module.is_some() {
            sql.push_str(&format!(" AND module_name = ${}", next()));
        }
        if filter.schedule_type.is_some() {
            sql.push_str(&format!(" AND schedule_type = ${}", next()));
        }
        if filter.enabled.is_some() {
            sql.push_str(&format!(" AND enabled = ${}", next()));
        }
        if filter.after_id.is_some() {
            sql.push_str(&format!(" AND id > ${}", next()));
        }
        sql.push_str(&format!(" ORDER BY id LIMIT ${}", next()));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        if let Some(tenant) = &filter.tenant {
            query = query.bind(tenant.clone());
        }
        if let Some(group) = &filter.group {
            query = query.bind(group.clone());
        }
        if let Some(name) = &filter.name {
            query = query.bind(name.clone());
        }
        if let Some(search) = &filter.search {
            query = query.bind(like_pattern(search));
            if by_trigrams {
                // One phrase: the text as it is, quotes doubled.
                query = query.bind(format!("\"{}\"", search.replace('"', "\"\"")));
            }
        }
        if let Some(module) = &filter.module {
            query = query.bind(module.clone());
        }
        if let Some(kind) = filter.schedule_type {
            query = query.bind(kind.as_str());
        }
        if let Some(enabled) = filter.enabled {
            query = query.bind(i64::from(enabled));
        }
        if let Some(after) = filter.after_id {
            query = query.bind(after);
        }
        let rows = query.bind(filter.limit).fetch_all(&self.pool).await?;
        let mut jobs = rows
            .iter()
            .map(job_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        attach_children(&mut *self.pool.acquire().await?, self.backend, &mut jobs).await?;
        Ok(jobs)
    }

    /// The jobs that name `id` among their children: (id, name).
    pub async fn parents_of(&self, id: JobId) -> Result<Vec<(JobId, String)>, StoreError> {
        Ok(
            sqlx::query(
                "SELECT job.id AS id, job.name AS name FROM job_child \
                 JOIN job ON job.id = job_child.job_id WHERE job_child.child_id = $1 ORDER BY job.id",
            )
            .bind(id)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| Ok((row.try_get("id")?, row.try_get("name")?)))
            .collect::<Result<_, sqlx::Error>>()?,
        )
    }

    /// Every job, by id (tests and tools; the API reads pages).
    pub async fn jobs(&self) -> Result<Vec<JobRow>, StoreError> {
        let rows = sqlx::query(concat!("SELECT ", job_columns!(), " FROM job ORDER BY id"))
            .fetch_all(&self.pool)
            .await?;
        let mut jobs = rows
            .iter()
            .map(job_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        attach_children(&mut *self.pool.acquire().await?, self.backend, &mut jobs).await?;
        Ok(jobs)
    }

    /// Starts or stops a job, setting its next fire.
    pub async fn set_enabled(
        &self,
        id: JobId,
        enabled: bool,
        next_fire_at_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE job SET enabled = $1, next_fire_at_ms = $2, updated_at_ms = $3, pause = NULL, \
             pause_until_ms = NULL WHERE id = $4",
        )
        .bind(i64::from(enabled))
        .bind(next_fire_at_ms)
        .bind(now_ms)
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stops a job: no next fire, and its fires and retries waiting to be
    /// dispatched end as cancelled, in one transaction. Returns the ids of
    /// the cancelled runs, or `None` if there is no such job.
    pub async fn stop_job(&self, id: JobId, now_ms: i64) -> Result<Option<Vec<RunId>>, StoreError> {
        self.pause_job(id, None, None, now_ms).await
    }

    /// Pauses a job: as [`Store::stop_job`], recording `pause`; with a next
    /// fire (the first after the pause's end) it stays enabled and resumes
    /// by itself then. Without `pause` it is a stop (and clears a pause).
    pub async fn pause_job(
        &self,
        id: JobId,
        pause: Option<&cronbox_api::Pause>,
        next_fire_at_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<Option<Vec<RunId>>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let stopped = sqlx::query(
            "UPDATE job SET enabled = $3, next_fire_at_ms = $4, updated_at_ms = $1, pause = $5, \
             pause_until_ms = $6 WHERE id = $2",
        )
        .bind(now_ms)
        .bind(id)
        .bind(i64::from(next_fire_at_ms.is_some()))
        .bind(next_fire_at_ms)
        .bind(pause.map(|pause| json_text("pause", pause)).transpose()?)
        .bind(pause.and_then(|pause| pause.until_ms))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if stopped != 1 {
            return Ok(None);
        }
        let cancelled = cancel_waiting(
            &mut tx,
            id,
            Some(&[
                TriggerKind::Schedule,
                TriggerKind::Misfire,
                TriggerKind::Retry,
            ]),
            "cancelled: the job was stopped before this run was dispatched",
            now_ms,
        )
        .await?;
        tx.commit().await?;
        Ok(Some(cancelled))
    }

    /// Forgets the pauses that ended by `now_ms` (their jobs fire again);
    /// how many.
    pub async fn clear_ended_pauses(&self, now_ms: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query(
            "UPDATE job SET pause = NULL, pause_until_ms = NULL WHERE pause_until_ms <= $1",
        )
        .bind(now_ms)
        .execute(&self.writer)
        .await?
        .rows_affected())
    }

    /// Sets the next fire of a FIX_DELAY job whose chain waits for a run to
    /// end, once: only an enabled FIX_DELAY job without a next fire is
    /// changed, so the first of several ends (broadcast shards, a restart
    /// in between) wins and the rest change nothing. True if it was set.
    pub async fn continue_fixed_delay(
        &self,
        job_id: JobId,
        next_fire_at_ms: i64,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE job SET next_fire_at_ms = $1, updated_at_ms = $2 WHERE id = $3 \
             AND enabled = 1 AND schedule_type = 'FIX_DELAY' AND next_fire_at_ms IS NULL",
        )
        .bind(next_fire_at_ms)
        .bind(now_ms)
        .bind(job_id)
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// Deletes a job and its durable state (its runs stay as history).
    /// Returns false if there was no such job.
    pub async fn delete_job(&self, id: JobId) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM job_state WHERE job_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM job_child WHERE job_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let deleted = sqlx::query("DELETE FROM job WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted == 1)
    }
}

/// The PostgreSQL transaction lock every writer of child links takes, so
/// that cycle checks see each other's links.
const CHILD_LINKS_LOCK: i64 = 0x6372_6f6e_6368_6c64; // "cronchld"

/// Replaces job `id`'s child links with `children`, in order.
async fn write_children(
    conn: &mut sqlx::AnyConnection,
    id: JobId,
    children: &[JobId],
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM job_child WHERE job_id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await?;
    add_children(conn, id, children).await
}

/// Writes the child links of a job that has none yet.
async fn add_children(
    conn: &mut sqlx::AnyConnection,
    id: JobId,
    children: &[JobId],
) -> Result<(), StoreError> {
    for (position, child) in children.iter().enumerate() {
        sqlx::query(
            "INSERT INTO job_child (job_id, position, child_id) VALUES ($1, $2, $3) \
             ON CONFLICT (job_id, child_id) DO NOTHING",
        )
        .bind(id)
        .bind(position as i64)
        .bind(*child)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Inserts one job's row; returns its id.
async fn insert_job_row(
    conn: &mut sqlx::AnyConnection,
    job: &JobRow,
    now_ms: i64,
) -> Result<JobId, StoreError> {
    let row = bind_definition(sqlx::query(INSERT_JOB.as_str()), job)?
        .bind(job.next_fire_at_ms)
        .bind(&job.tenant)
        .bind(i64::from(job.enabled))
        .bind(now_ms)
        .fetch_one(&mut *conn)
        .await?;
    Ok(row.try_get("id")?)
}

/// Whether job `id` is reachable from its own children.
async fn closes_cycle(conn: &mut sqlx::AnyConnection, id: JobId) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "WITH RECURSIVE reach(job_id) AS ( \
             SELECT child_id FROM job_child WHERE job_id = $1 \
             UNION SELECT job_child.child_id FROM job_child \
             JOIN reach ON job_child.job_id = reach.job_id \
         ) SELECT 1 AS found FROM reach WHERE job_id = $1 LIMIT 1",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .is_some())
}

/// Fills each job's children from `job_child`, in one query.
async fn attach_children(
    conn: &mut sqlx::AnyConnection,
    backend: Backend,
    jobs: &mut [JobRow],
) -> Result<(), StoreError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let index: HashMap<JobId, usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, job)| (job.id, i))
        .collect();
    let ids: Vec<JobId> = jobs.iter().map(|job| job.id).collect();
    let sql = format!(
        "SELECT job_id, child_id FROM job_child WHERE job_id IN ({}) ORDER BY job_id, position",
        backend.ids_in(1)
    );
    for row in sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(json_text("rows", &ids)?)
        .fetch_all(&mut *conn)
        .await?
    {
        let job_id: JobId = row.try_get("job_id")?;
        if let Some(at) = index.get(&job_id) {
            jobs[*at].children.push(row.try_get("child_id")?);
        }
    }
    Ok(())
}

/// A `LIKE` pattern matching names that contain `text` in any letter case
/// (its `%`, `_` and `\\` taken literally).
fn like_pattern(text: &str) -> String {
    let mut pattern = String::from("%");
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}
