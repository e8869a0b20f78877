//! Module content by digest, which tenant owns it, and named versions with
//! labels.

use super::*;

/// What a new version of a module moved: the jobs following the module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Moved {
    /// How many jobs now run the new version.
    pub jobs: u64,
    /// The version's content they ran before (none for a module's first
    /// version, or when the content did not change).
    pub from: Option<Digest>,
    /// The groups of those jobs (whose executors should compile it).
    pub groups: Vec<String>,
}

/// A new version of a named module, as pushed.
#[derive(Debug, Clone, Copy)]
pub struct VersionPush<'a> {
    pub tenant: &'a str,
    pub name: &'a str,
    pub digest: &'a Digest,
    pub labels: &'a [String],
    /// Why, when not a plain push (`rollback to version 2`).
    pub note: &'a str,
    /// Who pushed it (a user's name, or which kind of token).
    pub pushed_by: &'a str,
}

pub use cronbox_api::ModuleVersion;

macro_rules! module_version_columns {
    () => {
        "name, version, digest, note, pushed_by, created_at_ms"
    };
}

/// A version without its labels (see [`attach_labels`]).
fn module_version_from_row(row: &AnyRow) -> Result<ModuleVersion, sqlx::Error> {
    Ok(ModuleVersion {
        name: row.try_get("name")?,
        version: row.try_get("version")?,
        digest: row.try_get("digest")?,
        labels: Vec::new(),
        note: row.try_get("note")?,
        pushed_by: row.try_get("pushed_by")?,
        created_at_ms: row.try_get("created_at_ms")?,
    })
}

/// Puts `label` on version `version` of module `name`, taking it off
/// whichever version had it.
async fn put_label(
    conn: &mut sqlx::AnyConnection,
    tenant: &str,
    name: &str,
    version: i64,
    label: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO module_label (tenant, name, label, version) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (tenant, name, label) DO UPDATE SET version = excluded.version",
    )
    .bind(tenant)
    .bind(name)
    .bind(label)
    .bind(version)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Fills the labels of `versions` (each a `(tenant, version)`) from
/// `module_label`: the labels of `tenant`'s modules (every tenant's when
/// empty), in one query.
async fn attach_labels(
    conn: &mut sqlx::AnyConnection,
    tenant: &str,
    versions: &mut [(String, ModuleVersion)],
) -> Result<(), StoreError> {
    if versions.is_empty() {
        return Ok(());
    }
    let rows = sqlx::query(
        "SELECT tenant, name, version, label FROM module_label \
         WHERE ($1 = '' OR tenant = $1) ORDER BY label",
    )
    .bind(tenant)
    .fetch_all(&mut *conn)
    .await?;
    let mut index: HashMap<(String, String, i64), Vec<String>> = HashMap::new();
    for row in rows {
        index
            .entry((
                row.try_get("tenant")?,
                row.try_get("name")?,
                row.try_get("version")?,
            ))
            .or_default()
            .push(row.try_get("label")?);
    }
    for (tenant, version) in versions.iter_mut() {
        if let Some(labels) = index.remove(&(tenant.clone(), version.name.clone(), version.version))
        {
            version.labels = labels;
        }
    }
    Ok(())
}

impl Store {
    /// Stores a module's bytes under its digest (idempotent).
    pub async fn put_module(
        &self,
        digest: &str,
        content: &[u8],
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            // The same content again restarts its grace before collection.
            "INSERT INTO module (digest, size, content, created_at_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (digest) DO UPDATE SET created_at_ms = excluded.created_at_ms",
        )
        .bind(digest)
        .bind(content.len() as i64)
        .bind(content.to_vec())
        .bind(now_ms)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Deletes module content stored before `stored_before_ms` that no
    /// job runs, no kept version names and no open run will fetch, with
    /// its owners; how many contents went.
    pub async fn collect_unused_modules(&self, stored_before_ms: i64) -> Result<u64, StoreError> {
        let mut tx = self.writer.begin().await?;
        // An open run names its module by bytes (`module_sha`) or, written
        // before migration 0019, by text. Only fixed SQL goes into the text.
        let sql = format!(
            "DELETE FROM module WHERE created_at_ms < $1 \
             AND NOT EXISTS (SELECT 1 FROM job WHERE job.module_digest = module.digest) \
             AND NOT EXISTS (SELECT 1 FROM module_version v WHERE v.digest = module.digest) \
             AND NOT EXISTS (SELECT 1 FROM run WHERE run.status IN ('pending', 'dispatched') \
                             AND (run.module_sha = {} OR run.module_digest = module.digest))",
            self.backend.bytes_of_hex("module.digest"),
        );
        let deleted = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(stored_before_ms)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if deleted > 0 {
            sqlx::query(
                "DELETE FROM module_owner WHERE NOT EXISTS \
                 (SELECT 1 FROM module WHERE module.digest = module_owner.digest)",
            )
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(deleted)
    }

    /// A module's bytes.
    pub async fn module(&self, digest: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(sqlx::query("SELECT content FROM module WHERE digest = $1")
            .bind(digest)
            .fetch_optional(&self.pool)
            .await?
            .map(|row| row.try_get("content"))
            .transpose()?)
    }

    /// Records that `tenant` uploaded the module `digest` (idempotent).
    pub async fn own_module(&self, tenant: &str, digest: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO module_owner (tenant, digest) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(tenant)
        .bind(digest)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Whether `tenant` uploaded the module `digest`.
    pub async fn owns_module(&self, tenant: &str, digest: &str) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("SELECT 1 AS one FROM module_owner WHERE tenant = $1 AND digest = $2")
                .bind(tenant)
                .bind(digest)
                .fetch_optional(&self.pool)
                .await?
                .is_some(),
        )
    }

    /// Adds `digest` as the next version of module `name` of `tenant`, then
    /// keeps only its newest `keep` versions (and any a job pins or a label
    /// names), and
    /// moves the jobs that follow the module to it, in one transaction. A
    /// push of the content the latest version already has changes nothing
    /// unless `note` says why (a rollback). Returns the version and how
    /// many jobs moved.
    pub async fn add_module_version(
        &self,
        push: &VersionPush<'_>,
        keep: usize,
        now_ms: i64,
    ) -> Result<(ModuleVersion, Moved), StoreError> {
        let VersionPush {
            tenant,
            name,
            digest,
            labels,
            note,
            pushed_by,
        } = *push;
        let mut tx = self.writer.begin().await?;
        let latest = sqlx::query(concat!(
            "SELECT ",
            module_version_columns!(),
            " FROM module_version WHERE tenant = $1 AND name = $2 ORDER BY version DESC LIMIT 1"
        ))
        .bind(tenant)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?
        .as_ref()
        .map(module_version_from_row)
        .transpose()?;
        if let Some(latest) = &latest
            && latest.digest == *digest
            && note.is_empty()
            && labels.is_empty()
        {
            tx.rollback().await?;
            return Ok((latest.clone(), Moved::default()));
        }
        let version = latest.as_ref().map_or(1, |latest| latest.version + 1);
        sqlx::query(
            "INSERT INTO module_version (tenant, name, version, digest, note, created_at_ms, \
             pushed_by) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(tenant)
        .bind(name)
        .bind(version)
        .bind(digest)
        .bind(note)
        .bind(now_ms)
        .bind(pushed_by)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM module_version WHERE tenant = $1 AND name = $2 AND version <= $3 \
             AND NOT EXISTS (SELECT 1 FROM job WHERE job.tenant = module_version.tenant \
             AND job.module_name = module_version.name \
             AND job.module_version = module_version.version) \
             AND NOT EXISTS (SELECT 1 FROM module_label l WHERE l.tenant = module_version.tenant \
             AND l.name = module_version.name AND l.version = module_version.version)",
        )
        .bind(tenant)
        .bind(name)
        .bind(version - keep as i64)
        .execute(&mut *tx)
        .await?;
        // Labels go with the versions they were on.
        sqlx::query(
            "DELETE FROM module_label WHERE tenant = $1 AND name = $2 AND NOT EXISTS \
             (SELECT 1 FROM module_version v WHERE v.tenant = module_label.tenant \
             AND v.name = module_label.name AND v.version = module_label.version)",
        )
        .bind(tenant)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        // A label names one version: those given move here.
        for label in labels {
            put_label(&mut tx, tenant, name, version, label).await?;
        }
        let jobs = sqlx::query(
            "UPDATE job SET module_digest = $1, updated_at_ms = $2 WHERE tenant = $3 \
             AND module_name = $4 AND module_version IS NULL",
        )
        .bind(digest)
        .bind(now_ms)
        .bind(tenant)
        .bind(name)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let groups = if jobs == 0 {
            Vec::new()
        } else {
            sqlx::query_scalar(
                "SELECT DISTINCT group_name FROM job WHERE tenant = $1 AND module_name = $2 \
                 AND module_version IS NULL ORDER BY group_name",
            )
            .bind(tenant)
            .bind(name)
            .fetch_all(&mut *tx)
            .await?
        };
        tx.commit().await?;
        let moved = Moved {
            jobs,
            from: latest
                .map(|latest| latest.digest)
                .filter(|from| from != digest),
            groups,
        };
        Ok((
            ModuleVersion {
                name: name.to_owned(),
                version,
                digest: digest.clone(),
                labels: labels.to_vec(),
                note: note.to_owned(),
                pushed_by: pushed_by.to_owned(),
                created_at_ms: now_ms,
            },
            moved,
        ))
    }

    /// The versions of module `name` of `tenant`, newest first.
    /// `NAME@VERSION` of `tenant`'s latest module version with content
    /// `digest` (a rollback makes a version with an earlier one's content).
    pub async fn module_label(
        &self,
        tenant: &str,
        digest: &Digest,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT name, version FROM module_version WHERE tenant = $1 AND digest = $2 \
             ORDER BY version DESC LIMIT 1",
        )
        .bind(tenant)
        .bind(digest.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            let name: String = row.try_get("name")?;
            let version: i64 = row.try_get("version")?;
            Ok(format!("{name}@{version}"))
        })
        .transpose()
    }

    pub async fn module_versions(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Vec<ModuleVersion>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            module_version_columns!(),
            " FROM module_version WHERE tenant = $1 AND name = $2 ORDER BY version DESC"
        ))
        .bind(tenant)
        .bind(name)
        .fetch_all(&self.pool)
        .await?;
        let mut versions = rows
            .iter()
            .map(|row| Ok((tenant.to_owned(), module_version_from_row(row)?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        attach_labels(&mut *self.pool.acquire().await?, tenant, &mut versions).await?;
        Ok(versions.into_iter().map(|(_, version)| version).collect())
    }

    /// The latest version of each module of `tenant` (every tenant's when
    /// `None`), by name.
    pub async fn latest_modules(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<(String, ModuleVersion)>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT tenant, ",
            module_version_columns!(),
            " FROM module_version m WHERE ($1 = '' OR tenant = $1) AND version = \
             (SELECT MAX(version) FROM module_version l WHERE l.tenant = m.tenant AND l.name = m.name) \
             ORDER BY tenant, name"
        ))
        .bind(tenant.unwrap_or(""))
        .fetch_all(&self.pool)
        .await?;
        let mut versions = rows
            .iter()
            .map(|row| Ok((row.try_get("tenant")?, module_version_from_row(row)?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        attach_labels(
            &mut *self.pool.acquire().await?,
            tenant.unwrap_or(""),
            &mut versions,
        )
        .await?;
        Ok(versions)
    }

    /// Puts `label` on version `version` of module `name` (taking it off
    /// any other); false if there is no such version.
    pub async fn set_module_label(
        &self,
        tenant: &str,
        name: &str,
        version: i64,
        label: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        let exists = sqlx::query(
            "SELECT 1 AS one FROM module_version WHERE tenant = $1 AND name = $2 AND version = $3",
        )
        .bind(tenant)
        .bind(name)
        .bind(version)
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
        if !exists {
            tx.rollback().await?;
            return Ok(false);
        }
        put_label(&mut tx, tenant, name, version, label).await?;
        tx.commit().await?;
        Ok(true)
    }
}
