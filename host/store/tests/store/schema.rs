//! The schema: migrations on both engines, the two engines' schemas alike, PostgreSQL's day partitions, bad URLs.

use super::*;

/// Applies the migration files of one engine numbered from `from` and
/// below `before`.
async fn migrate(pool: &sqlx::AnyPool, engine: &str, from: &str, before: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(engine);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            from <= name.as_str() && name.as_str() < before
        })
        .collect();
    files.sort();
    for file in files {
        let sql = std::fs::read_to_string(&file).unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(pool)
            .await
            .unwrap();
    }
}

/// Migration 0006 turns comma-joined lists into rows and loses nothing:
/// each element once, in order, spaces trimmed, empty lists empty.
async fn lists_become_rows(pool: &sqlx::AnyPool, engine: &str) {
    migrate(pool, engine, "0001", "0006").await;
    sqlx::raw_sql(
        "INSERT INTO job (group_name, name, module_digest, schedule_type, children, created_at_ms, \
         updated_at_ms) VALUES ('default', 'p', 'd', 'NONE', '3, 2,3,', 0, 0), \
         ('default', 'q', 'd', 'NONE', '', 0, 0); \
         INSERT INTO module_version (tenant, name, version, digest, labels, created_at_ms) \
         VALUES ('default', 'm', 1, 'd1', 'stable,canary', 0), ('default', 'm', 2, 'd2', '', 0); \
         INSERT INTO executor_group (name, address_type, addresses) \
         VALUES ('pinned', 'MANUAL', 'http://b:1,http://a:1');",
    )
    .execute(pool)
    .await
    .unwrap();
    migrate(pool, engine, "0006", "0007").await;
    let rows = |sql: &'static str| async move {
        use sqlx::Row as _;
        sqlx::query(sql)
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|row| {
                format!(
                    "{}:{}",
                    row.try_get::<String, _>(0).unwrap(),
                    row.try_get::<String, _>(1).unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        rows(
            "SELECT CAST(job_id AS TEXT), CAST(child_id AS TEXT) FROM job_child ORDER BY position"
        )
        .await,
        ["1:3", "1:2"]
    );
    assert_eq!(
        rows("SELECT label, CAST(version AS TEXT) FROM module_label ORDER BY label").await,
        ["canary:1", "stable:1"]
    );
    assert_eq!(
        rows(
            "SELECT g.name, a.address FROM group_address a \
             JOIN executor_group g ON g.id = a.group_id ORDER BY a.position"
        )
        .await,
        ["pinned:http://b:1", "pinned:http://a:1"]
    );
}

/// Migration 0021 keeps every tenant's jobs in the groups they use: each
/// (group, tenant) of a job outside the operator's tenant is granted, and
/// the group `default` is shared with every tenant.
async fn groups_are_granted_to_the_tenants_using_them(pool: &sqlx::AnyPool, engine: &str) {
    migrate(pool, engine, "0001", "0021").await;
    sqlx::raw_sql(
        "INSERT INTO job (tenant, group_name, name, module_digest, schedule_type, created_at_ms, \
         updated_at_ms) VALUES ('acme', 'etl', 'a', 'd', 'NONE', 0, 0), \
         ('acme', 'etl', 'b', 'd', 'NONE', 0, 0), ('default', 'ops', 'c', 'd', 'NONE', 0, 0), \
         ('globex', 'default', 'd', 'd', 'NONE', 0, 0);",
    )
    .execute(pool)
    .await
    .unwrap();
    migrate(pool, engine, "0021", "0022").await;
    use sqlx::Row as _;
    let grants: Vec<String> =
        sqlx::query("SELECT group_name, tenant FROM group_tenant ORDER BY group_name, tenant")
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|row| {
                format!(
                    "{}:{}",
                    row.try_get::<String, _>(0).unwrap(),
                    row.try_get::<String, _>(1).unwrap()
                )
            })
            .collect();
    assert_eq!(grants, ["default:*", "default:globex", "etl:acme"]);
}

#[tokio::test]
async fn sqlite_groups_are_granted_in_migration_21() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    groups_are_granted_to_the_tenants_using_them(&pool, "sqlite").await;
}

#[tokio::test]
async fn postgres_groups_are_granted_in_migration_21() {
    sqlx::any::install_default_drivers();
    let server = PostgresServer::fresh_database();
    let pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    groups_are_granted_to_the_tenants_using_them(&pool, "postgres").await;
}

#[tokio::test]
async fn sqlite_lists_become_rows_in_migration_6() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
    lists_become_rows(&sqlx::AnyPool::connect(&url).await.unwrap(), "sqlite").await;
}

#[tokio::test]
async fn postgres_lists_become_rows_in_migration_6() {
    sqlx::any::install_default_drivers();
    let server = PostgresServer::fresh_database();
    let pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    lists_become_rows(&pool, "postgres").await;
}

/// Each table's columns, with their types in a common vocabulary (both
/// engines' integer types are `integer`, text is `text`, bytes `bytes`),
/// and whether each may be NULL; migration bookkeeping left out.
type Schema = std::collections::BTreeMap<String, Vec<(String, &'static str, bool)>>;

fn common_type(declared: &str) -> &'static str {
    match declared.to_ascii_lowercase().as_str() {
        "integer" | "bigint" | "int8" => "integer",
        "text" => "text",
        "blob" | "bytea" => "bytes",
        other => panic!("a column type the schemas should not use: {other}"),
    }
}

async fn sqlite_schema(url: &str) -> Schema {
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_sqlx%' \
         AND name NOT LIKE 'job_name_search%'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut schema = Schema::new();
    for table in tables {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT name, type, \"notnull\" AS required, pk FROM pragma_table_info('{table}')"
        )))
        .fetch_all(&pool)
        .await
        .unwrap();
        let mut columns: Vec<(String, &'static str, bool)> = rows
            .iter()
            .map(|row| {
                use sqlx::Row as _;
                let declared: String = row.try_get("type").unwrap();
                let required: i64 = row.try_get("required").unwrap();
                let key: i64 = row.try_get("pk").unwrap();
                (
                    row.try_get("name").unwrap(),
                    common_type(&declared),
                    required == 0 && key == 0,
                )
            })
            .collect();
        columns.sort();
        schema.insert(table, columns);
    }
    schema
}

async fn postgres_schema(url: &str) -> Schema {
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let rows = sqlx::query(
        "SELECT table_name::text AS table_name, column_name::text AS column_name, \
         data_type::text AS data_type, is_nullable::text AS is_nullable \
         FROM information_schema.columns WHERE table_schema = 'public' \
         AND table_name NOT LIKE '_sqlx%' AND table_name NOT IN \
         (SELECT relname FROM pg_class WHERE relispartition)",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut schema = Schema::new();
    for row in &rows {
        use sqlx::Row as _;
        let data_type: String = row.try_get("data_type").unwrap();
        let nullable: String = row.try_get("is_nullable").unwrap();
        schema
            .entry(row.try_get("table_name").unwrap())
            .or_default()
            .push((
                row.try_get("column_name").unwrap(),
                common_type(&data_type),
                nullable == "YES",
            ));
    }
    for columns in schema.values_mut() {
        columns.sort();
    }
    schema
}

/// The migrations of the two engines build the same tables, columns,
/// column kinds and nullability (PostgreSQL's run partitions aside: the
/// partitioned table is the one compared) (but SQLite's index of job names for
/// searches, an FTS5 table: PostgreSQL's is an index on the job table).
#[tokio::test]
async fn sqlite_and_postgres_schemas_are_the_same() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let url = format!("sqlite://{}", dir.path().join("cronbox.db").display());
    let sqlite = sqlite_schema(&url).await;
    drop(store);
    let server = PostgresServer::fresh_database();
    let _store = Store::connect(&server.url()).await.unwrap();
    let postgres = postgres_schema(&server.url()).await;
    assert!(
        sqlite["job"].contains(&("fresh_instance".to_owned(), "integer", false))
            && sqlite["job"].contains(&("fuel".to_owned(), "integer", true))
            && sqlite["module"].contains(&("content".to_owned(), "bytes", false)),
        "{:?}",
        sqlite["job"]
    );
    assert_eq!(
        sqlite.keys().collect::<Vec<_>>(),
        postgres.keys().collect::<Vec<_>>(),
        "the same tables"
    );
    for (table, columns) in &sqlite {
        assert_eq!(columns, &postgres[table], "columns of {table}");
    }
    // The indexes the migrations create by name (not the ones each engine
    // makes for keys and unique constraints).
    let sqlite_pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let mut sqlite_indexes: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL",
    )
    .fetch_all(&sqlite_pool)
    .await
    .unwrap();
    let postgres_pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    let mut postgres_indexes: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE schemaname = 'public' \
         AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key' \
         AND tablename NOT IN (SELECT relname FROM pg_class WHERE relispartition)",
    )
    .fetch_all(&postgres_pool)
    .await
    .unwrap();
    sqlite_indexes.sort();
    postgres_indexes.sort();
    // Job names' trigrams: an index on PostgreSQL, a table on SQLite.
    let trigrams = postgres_indexes
        .iter()
        .position(|name| name == "job_name_trigrams")
        .expect("pg_trgm is there and the index made");
    postgres_indexes.remove(trigrams);
    assert!(
        sqlite_indexes.contains(&"run_by_tenant".to_owned()),
        "{sqlite_indexes:?}"
    );
    assert_eq!(sqlite_indexes, postgres_indexes, "the same indexes");

    // A tenant's run listing reads its page through the tenant index; the
    // partial indexes of open runs and alarms to send serve their queries,
    // whose parameters are bound.
    for (query, index) in [
        (
            "SELECT id FROM run WHERE tenant = $1 ORDER BY id DESC LIMIT $2",
            "run_by_tenant",
        ),
        (
            "SELECT id FROM run WHERE status IN ('pending', 'dispatched') AND status = $1 \
             AND lease_until_ms < $2 ORDER BY scheduled_at_ms LIMIT 10",
            "run_by_status",
        ),
        (
            "SELECT id FROM run WHERE job_id = $2 AND status IN ('pending', 'dispatched') \
             AND status = $1",
            "run_pending_by_job",
        ),
        (
            "SELECT id FROM run WHERE alarm_status IN ('due', 'sending') \
             AND alarm_status = $1 ORDER BY id LIMIT $2",
            "run_alarms",
        ),
    ] {
        let plan: Vec<String> =
            sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {query}")))
                .bind("pending")
                .bind(5_i64)
                .fetch_all(&sqlite_pool)
                .await
                .unwrap()
                .iter()
                .map(|row| {
                    use sqlx::Row as _;
                    row.try_get::<String, _>("detail").unwrap()
                })
                .collect();
        assert!(
            plan.iter().any(|step| step.contains(index)),
            "{query}: {plan:?}"
        );
    }
}

/// Migration 0018 partitions the run table without copying it: the runs
/// written before become its first partition, ids carry on after theirs,
/// a fire written before is still written only once, and an ended run
/// still leaves its row for the daily reports.
#[tokio::test]
async fn postgres_runs_written_before_partitioning_are_kept_and_still_unique() {
    sqlx::any::install_default_drivers();
    let server = PostgresServer::fresh_database();
    let pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    migrate(&pool, "postgres", "0001", "0018").await;
    sqlx::raw_sql(
        "INSERT INTO job (group_name, name, module_digest, schedule_type, created_at_ms, \
         updated_at_ms) VALUES ('default', 'p', 'd', 'NONE', 0, 0); \
         INSERT INTO run (id, job_id, kind, scheduled_at_ms, status, module_digest, created_at_ms) \
         VALUES (41, 1, 'schedule', 1000, 'success', 'd', 1000), \
                (42, 1, 'schedule', 2000, 'pending', 'd', 2000);",
    )
    .execute(&pool)
    .await
    .unwrap();
    migrate(&pool, "postgres", "0018", "0019").await;
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        count("SELECT COUNT(*) FROM run_before_partitions").await,
        2,
        "the runs written before are its first partition"
    );
    let insert = "INSERT INTO run (job_id, kind, scheduled_at_ms, status, module_digest, \
                  created_at_ms) VALUES (1, 'schedule', $1, $2, 'd', $1) \
                  ON CONFLICT DO NOTHING RETURNING id";
    let written = |at: i64, status: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(insert)
                .bind(at)
                .bind(status)
                .fetch_optional(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        written(2000, "pending").await,
        None,
        "a fire is written once"
    );
    let later = 4_000_000_000_000_i64; // 2096: the default partition's
    // (The fire refused as a duplicate took an id too.)
    let id = written(later, "success").await.unwrap();
    assert!(id > 42, "ids carry on after the old runs': {id}");
    assert_eq!(count("SELECT COUNT(*) FROM run_default").await, 1);
    assert_eq!(
        count("SELECT COUNT(*) FROM run_end WHERE status = 'success' AND day = '2096-10-02'").await,
        1,
        "a run written ended is counted for the reports"
    );
    sqlx::query("UPDATE run SET status = 'failed' WHERE id = 42")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        count("SELECT COUNT(*) FROM run_end WHERE status = 'failed'").await,
        1,
        "an old run that ends is counted for the reports"
    );
}

/// On PostgreSQL retention drops whole days: housekeeping makes each
/// day's partition ahead, and drops one whose runs have all ended and were
/// all written before the retention's cutoff. A day holding an open run,
/// or a run written late (a backfill), is kept; the daily reports do not
/// change; runs of a day without a partition go to the default one.
#[tokio::test]
async fn postgres_run_partitions_are_made_ahead_and_dropped_whole() {
    use cronbox_store::DAY_MS;
    let server = PostgresServer::fresh_database();
    let store = Store::connect(&server.url()).await.unwrap();
    let id = store.insert_job(&job(), 0).await.unwrap();
    // Days after the end of the first partition (the day after today).
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        / DAY_MS;
    let first = today + 10;
    let at = |day: i64, hour: i64| (first + day) * DAY_MS + hour * 3_600_000;
    let made = store.maintain_run_partitions(at(0, 1), 3, 0).await.unwrap();
    assert_eq!(made.created.len(), 4, "{made:?}");
    assert!(made.dropped.is_empty(), "{made:?}");
    let again = store.maintain_run_partitions(at(0, 2), 3, 0).await.unwrap();
    assert!(
        again.created.is_empty() && again.dropped.is_empty(),
        "{again:?}"
    );

    // Day 0: two ended runs. Day 1: one ended, one still open. Day 2: one
    // written on day 30 (late). Day 3: none. Day 5: no partition.
    let mut ended = Vec::new();
    for (day, created_day) in [(0, 0), (0, 0), (1, 1), (2, 30)] {
        let run = store
            .insert_run(&fire(id, at(day, ended.len() as i64)), at(created_day, 0))
            .await
            .unwrap();
        store
            .finish_run(&RunEnd::failed(
                run,
                RunOutcome::Failed,
                "no",
                at(created_day, 5),
            ))
            .await
            .unwrap()
            .unwrap();
        ended.push(run);
    }
    let open = store
        .insert_run(&fire(id, at(1, 9)), at(1, 9))
        .await
        .unwrap();
    let unpartitioned = store
        .insert_run(&fire(id, at(5, 0)), at(5, 0))
        .await
        .unwrap();
    let partition_of = |run: RunId| {
        let url = server.url();
        async move {
            let pool = sqlx::AnyPool::connect(&url).await.unwrap();
            sqlx::query_scalar::<_, String>(
                "SELECT tableoid::regclass::text FROM run WHERE id = $1",
            )
            .bind(run)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(partition_of(ended[0]).await, made.created[0]);
    assert_eq!(partition_of(open).await, made.created[1]);
    assert_eq!(partition_of(unpartitioned).await, "run_default");
    store.update_daily_reports().await.unwrap();
    let reports = store
        .daily_reports("default", "1970-01-01", "2100-01-01")
        .await
        .unwrap();
    assert_eq!(
        reports.iter().map(|report| report.failed).sum::<i64>(),
        4,
        "{reports:?}"
    );

    // An update by run id that names the range of its runs' scheduled
    // times (as marks and ends do when they know them) visits only the
    // partitions of that range.
    let pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN UPDATE run SET status = status WHERE id IN ($1) \
         AND scheduled_at_ms BETWEEN $2 AND $3",
    )
    .bind(open)
    .bind(at(1, 9))
    .bind(at(1, 9))
    .fetch_all(&pool)
    .await
    .unwrap();
    let visited: Vec<&String> = plan
        .iter()
        .filter(|line| line.contains("Update on run_"))
        .collect();
    assert!(
        visited.len() == 1 && visited[0].contains(&made.created[1]),
        "{plan:#?}"
    );

    // Day 40, a retention of 10 days: days 0 to 3 are past it, but the
    // run written on day 30 is not.
    let changes = store
        .maintain_run_partitions(at(40, 0), 3, at(30, 0))
        .await
        .unwrap();
    let name = |day: usize| made.created[day].clone();
    let mut dropped = changes.dropped.clone();
    dropped.sort();
    assert_eq!(
        dropped,
        ["run_before_partitions".to_owned(), name(0), name(3)],
        "the day of ended runs, the empty day and the (empty) runs from \
         before partitioning"
    );
    assert_eq!(changes.created.len(), 4, "days 40 to 43: {changes:?}");
    assert_eq!(store.run(ended[0]).await.unwrap(), None);
    assert_eq!(store.run(ended[1]).await.unwrap(), None);
    for kept in [ended[2], ended[3], open, unpartitioned] {
        assert!(store.run(kept).await.unwrap().is_some(), "run {kept:?}");
    }
    let names: Vec<String> = store
        .run_partitions()
        .await
        .unwrap()
        .into_iter()
        .map(|partition| partition.name)
        .collect();
    assert!(
        names.contains(&name(1)) && names.contains(&name(2)) && !names.contains(&name(0)),
        "{names:?}"
    );
    store.update_daily_reports().await.unwrap();
    assert_eq!(
        store
            .daily_reports("default", "1970-01-01", "2100-01-01")
            .await
            .unwrap(),
        reports,
        "the reports count the dropped runs still"
    );

    // Once the open run ends and the late run has aged out, their days go.
    store
        .finish_run(&RunEnd::failed(open, RunOutcome::Failed, "no", at(40, 1)))
        .await
        .unwrap()
        .unwrap();
    let changes = store
        .maintain_run_partitions(at(41, 0), 3, at(30, 0))
        .await
        .unwrap();
    assert_eq!(changes.dropped, vec![name(1)], "{changes:?}");
    let changes = store
        .maintain_run_partitions(at(41, 0), 3, at(30, 0) + 1)
        .await
        .unwrap();
    assert_eq!(changes.dropped, vec![name(2)], "{changes:?}");

    // A day detached by an admin that stopped before deleting it is
    // deleted by the next pass; nothing else is touched.
    sqlx::raw_sql(
        "CREATE TABLE run_d19990101 (id BIGINT); CREATE TABLE run_dusk (id BIGINT); \
         CREATE TABLE rundown (id BIGINT)",
    )
    .execute(&pool)
    .await
    .unwrap();
    store
        .maintain_run_partitions(at(41, 0), 0, at(30, 0) + 1)
        .await
        .unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT relname::text FROM pg_class WHERE relkind = 'r' AND NOT relispartition \
         AND relname LIKE 'run%' ORDER BY relname",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(tables, ["run_dusk", "run_end", "rundown"], "{tables:?}");
}

#[tokio::test]
async fn a_bad_database_url_is_refused_clearly() {
    let error = Store::connect("mysql://nope").await.unwrap_err();
    assert!(
        error.to_string().contains("unsupported database URL"),
        "{error}"
    );
}
