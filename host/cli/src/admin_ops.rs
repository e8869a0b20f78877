//! `cronbox admin migrate | backup | restore`: operations on an admin's
//! database, run before the admins start (a migration job) or beside a
//! running one (a backup).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Subcommand;
use cronbox_admin::store::backup::{self, CopySummary};
use cronbox_admin::{Database, Migrations, SchemaVersion, Store};

/// What `cronbox admin` does instead of serving.
#[derive(Debug, Subcommand)]
pub enum AdminOperation {
    /// Apply the database's pending migrations under its lock, then exit
    /// (as a job before the admins start, with `cronbox admin
    /// --no-migrate`). Two at once never both migrate.
    #[command(
        after_help = "Exit status: 0 when the schema is current (or was made so), \
                            1 when --check finds migrations pending, 2 on an error."
    )]
    Migrate {
        /// Change nothing: print the schema's version and what is pending.
        #[arg(long)]
        check: bool,
    },
    /// Copy the embedded SQLite store into a new FILE while its admin runs
    /// (one consistent instant). PostgreSQL: use pg_dump or point-in-time
    /// recovery (docs/deploying.md). Back up the secrets key file apart.
    Backup {
        /// The copy to write (must not exist).
        file: PathBuf,
    },
    /// Put a backup in the data directory, for the next admin to start
    /// from (stop the admin first).
    Restore {
        /// A file `cronbox admin backup` wrote.
        file: PathBuf,
        /// Set a database already in the data directory aside (renamed,
        /// never deleted) and restore in its place.
        #[arg(long)]
        replace: bool,
    },
}

pub fn main(operation: AdminOperation, database: Database) -> anyhow::Result<ExitCode> {
    let threads = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    threads.block_on(async move {
        match operation {
            AdminOperation::Migrate { check } => migrate(database, check).await,
            AdminOperation::Backup { file } => {
                let Database::Sqlite(dir) = database else {
                    bail!(
                        "cronbox admin backup copies the embedded SQLite store; back a PostgreSQL \
                         database up with pg_dump or point-in-time recovery (docs/deploying.md, \
                         \"Backups\")"
                    );
                };
                let copy = backup::backup_sqlite(&dir, &file).await?;
                println!("backed up {} to {}", dir.display(), file.display());
                print_summary(&copy);
                println!(
                    "secrets in it stay sealed: keep the secrets key file (--secrets-key-file) \
                     with the backup, apart from it"
                );
                Ok(ExitCode::SUCCESS)
            }
            AdminOperation::Restore { file, replace } => {
                let Database::Sqlite(dir) = database else {
                    bail!(
                        "cronbox admin restore fills an embedded SQLite data directory; restore a \
                         PostgreSQL database with pg_restore (docs/deploying.md, \"Backups\")"
                    );
                };
                let copy = backup::restore_sqlite(&file, &dir, replace).await?;
                println!("restored {} into {}", file.display(), dir.display());
                print_summary(&copy);
                println!(
                    "start the admin with the same secrets key: fires missed since the backup \
                     follow each job's misfire policy"
                );
                Ok(ExitCode::SUCCESS)
            }
        }
    })
}

async fn migrate(database: Database, check: bool) -> anyhow::Result<ExitCode> {
    let mode = if check {
        Migrations::Inspect
    } else {
        Migrations::Apply
    };
    let store = match &database {
        Database::Sqlite(dir) => Store::open_sqlite_with(dir, mode).await?,
        Database::Url(url) => Store::connect_with(url, mode).await?,
    };
    let schema = store.schema().clone();
    store.close().await;
    print_schema(&schema);
    Ok(if check && !schema.pending.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_schema(schema: &SchemaVersion) {
    println!(
        "schema version {} (this admin knows up to {}; admins from {} on may serve it)",
        schema.applied, schema.known, schema.oldest_reader
    );
    if schema.pending.is_empty() {
        println!("no migration pending");
    }
    for (version, description) in &schema.pending {
        println!("pending: {version} {description}");
    }
}

fn print_summary(copy: &CopySummary) {
    println!(
        "{} bytes, schema version {}: {} tenants, {} jobs, {} module versions, {} workflows, {} \
         users, {} runs (the newest: {})",
        copy.bytes,
        copy.schema.applied,
        copy.tenants,
        copy.jobs,
        copy.module_versions,
        copy.workflows,
        copy.users,
        copy.runs,
        copy.last_run
    );
}
