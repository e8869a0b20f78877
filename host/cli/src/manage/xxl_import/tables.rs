//! xxl-job's two tables as exported: rows of `xxl_job_group` and
//! `xxl_job_info`, each a map from column name to text (NULL as absent),
//! read from a `mysqldump` file (its `CREATE TABLE` gives the column order
//! of `INSERT ... VALUES`, unless the inserts name their columns), or from a
//! CSV, `mariadb -B` TSV or JSON export of one table named after it
//! (`xxl_job_info.csv`, an array of objects in `xxl_job_group.json`), or
//! what `INTO OUTFILE` writes of it, without a header (`outfile`).

use std::collections::HashMap;
use std::path::Path;

use super::outfile;
use anyhow::{Context, bail};

/// One row: column → value (a NULL column is left out).
pub type Row = HashMap<String, String>;

/// The rows of both tables, as read from every source.
#[derive(Debug, Default)]
pub struct Tables {
    pub groups: Vec<Row>,
    pub jobs: Vec<Row>,
}

const GROUP_TABLE: &str = "xxl_job_group";
const JOB_TABLE: &str = "xxl_job_info";

impl Tables {
    /// Adds what `path` holds: a `.sql` dump (both tables), or a `.csv` or
    /// `.json` export of the table its name starts with; a header-less one
    /// (`INTO OUTFILE`'s) written with backslash escapes (`escaped`, MySQL's
    /// default) or `ESCAPED BY ''`.
    pub fn read(&mut self, path: &Path, escaped: bool) -> anyhow::Result<()> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        // A byte-order mark, as spreadsheets write it, is not the first
        // column's name.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if extension.eq_ignore_ascii_case("sql") {
            let mut dump = read_dump(text).with_context(|| format!("in {}", path.display()))?;
            self.groups
                .append(dump.entry(GROUP_TABLE.into()).or_default());
            self.jobs.append(dump.entry(JOB_TABLE.into()).or_default());
            return Ok(());
        }
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let table = if stem.starts_with(JOB_TABLE) {
            JOB_TABLE
        } else if stem.starts_with(GROUP_TABLE) {
            GROUP_TABLE
        } else {
            bail!(
                "{}: name a table's export after it ({JOB_TABLE}.csv, {GROUP_TABLE}.json, ...)",
                path.display()
            );
        };
        let rows = match extension.to_ascii_lowercase().as_str() {
            "csv" | "tsv" | "txt" if outfile::starts_with_a_row(text) => {
                outfile::read(text, table, escaped)
            }
            "csv" => read_csv(text),
            "tsv" => read_tsv(text),
            "json" => read_json(text),
            _ => bail!(
                "{}: not a .sql dump nor a .csv, .tsv, .txt or .json export",
                path.display()
            ),
        }
        .with_context(|| format!("in {}", path.display()))?;
        match table {
            JOB_TABLE => self.jobs.extend(rows),
            _ => self.groups.extend(rows),
        }
        Ok(())
    }
}

/// A CSV export with a header row (RFC 4180: quoted fields, CRLF or LF).
fn read_csv(text: &str) -> anyhow::Result<Vec<Row>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .context("line 1: expected a header of column names")?
        .iter()
        .map(str::to_owned)
        .collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|error| {
            let line = error.position().map_or(0, |at| at.line());
            anyhow::anyhow!("line {line}: {error}")
        })?;
        let row = header
            .iter()
            .zip(record.iter())
            .filter(|(_, value)| *value != "NULL" && *value != "\\N")
            .map(|(column, value)| (column.clone(), value.to_owned()))
            .collect();
        rows.push(row);
    }
    Ok(rows)
}

/// What `mariadb -B` (`--batch`) prints of `SELECT * FROM TABLE`: a header
/// line of column names, then a line per row, fields between tabs, with
/// tab, newline, carriage return, NUL and backslash written as `\t`,
/// `\n`, `\r`, `\0` and `\\`. NULL is `NULL` (as is the text NULL: the
/// client writes both alike) or `\N` (`SELECT ... INTO OUTFILE`'s).
fn read_tsv(text: &str) -> anyhow::Result<Vec<Row>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .context("no header line of column names")?
        .split('\t')
        .collect();
    let mut rows = Vec::new();
    for (at, line) in lines.enumerate() {
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != header.len() {
            bail!(
                "line {}: {} fields for {} columns",
                at + 2,
                fields.len(),
                header.len()
            );
        }
        rows.push(
            header
                .iter()
                .zip(fields)
                .filter(|(_, field)| *field != "NULL" && *field != "\\N")
                .map(|(column, field)| ((*column).to_owned(), unescape_tsv(field)))
                .collect(),
        );
    }
    Ok(rows)
}

/// A field of `mariadb -B` output as it was stored.
fn unescape_tsv(field: &str) -> String {
    let mut value = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            value.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => value.push('\t'),
            Some('n') => value.push('\n'),
            Some('r') => value.push('\r'),
            Some('0') => value.push('\0'),
            Some(other) => value.push(other),
            None => value.push('\\'),
        }
    }
    value
}

/// A JSON export: an array of objects (or `{"TABLE": [...]}` as some tools
/// write it).
fn read_json(text: &str) -> anyhow::Result<Vec<Row>> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    let items = match value {
        serde_json::Value::Array(items) => items,
        serde_json::Value::Object(mut object) if object.len() == 1 => {
            match object.values_mut().next().map(serde_json::Value::take) {
                Some(serde_json::Value::Array(items)) => items,
                _ => bail!("expected an array of rows"),
            }
        }
        _ => bail!("expected an array of rows"),
    };
    items
        .into_iter()
        .map(|item| match item {
            serde_json::Value::Object(object) => Ok(object
                .into_iter()
                .filter_map(|(column, value)| {
                    let text = match value {
                        serde_json::Value::Null => return None,
                        serde_json::Value::String(text) => text,
                        other => other.to_string(),
                    };
                    Some((column, text))
                })
                .collect()),
            _ => bail!("a row is not an object"),
        })
        .collect()
}

/// The rows of every table a `mysqldump` file inserts into. An error
/// names the line of the statement it is in.
fn read_dump(text: &str) -> anyhow::Result<HashMap<String, Vec<Row>>> {
    let mut columns: HashMap<String, Vec<String>> = HashMap::new();
    let mut tables: HashMap<String, Vec<Row>> = HashMap::new();
    let mut rest = text;
    while let Some(at) = next_statement(rest) {
        rest = &rest[at..];
        let line = || {
            format!(
                "line {}",
                text[..text.len() - rest.len()].matches('\n').count() + 1
            )
        };
        if let Some(after) = strip_keyword(rest, "CREATE TABLE") {
            let (table, body) = identifier(after).with_context(line)?;
            let end = body.find(";").unwrap_or(body.len());
            columns.insert(table, create_columns(&body[..end]));
            rest = &body[end..];
        } else if let Some(after) = insert_into(rest) {
            let (table, rows, left) = insert(after, &columns).with_context(line)?;
            tables.entry(table).or_default().extend(rows);
            rest = left;
        } else {
            // Another statement or a comment: skip its line.
            rest = rest.find('\n').map_or("", |end| &rest[end + 1..]);
        }
    }
    Ok(tables)
}

/// One `INSERT` after its keywords: its table, its rows (column → value,
/// NULL left out; the columns named, else those of the table's `CREATE
/// TABLE` in `columns`) and what follows it.
fn insert<'a>(
    text: &'a str,
    columns: &HashMap<String, Vec<String>>,
) -> anyhow::Result<(String, Vec<Row>, &'a str)> {
    let (table, after) = identifier(text)?;
    let (named, after) = match after.trim_start().strip_prefix('(') {
        Some(list) => {
            let end = list.find(')').context("an unclosed column list")?;
            let named = list[..end]
                .split(',')
                .map(|c| c.trim().trim_matches('`').to_owned())
                .collect();
            (Some(named), &list[end + 1..])
        }
        None => (None, after),
    };
    let after = strip_keyword(after, "VALUES").context("INSERT without VALUES")?;
    let (tuples, left) = values(after).with_context(|| format!("in the INSERT into {table}"))?;
    let Some(names) = named.or_else(|| columns.get(&table).cloned()) else {
        bail!(
            "INSERT INTO {table} names no columns and the file has no CREATE TABLE for it \
             (a dump with --no-create-info needs --complete-insert)"
        )
    };
    let mut rows = Vec::with_capacity(tuples.len());
    for tuple in tuples {
        if tuple.len() != names.len() {
            bail!(
                "a row of {table} has {} values for {} columns",
                tuple.len(),
                names.len()
            );
        }
        rows.push(
            names
                .iter()
                .zip(tuple)
                .filter_map(|(name, value)| value.map(|value| (name.clone(), value)))
                .collect(),
        );
    }
    Ok((table, rows, left))
}

/// What follows `INSERT INTO`, `INSERT IGNORE INTO` or `REPLACE INTO`
/// (mysqldump's `--insert-ignore` and `--replace`).
fn insert_into(text: &str) -> Option<&str> {
    ["INSERT INTO", "INSERT IGNORE INTO", "REPLACE INTO"]
        .iter()
        .find_map(|keyword| strip_keyword(text, keyword))
}

/// Where the next line with something on it starts.
fn next_statement(text: &str) -> Option<usize> {
    let start = text.len() - text.trim_start().len();
    (start < text.len()).then_some(start)
}

/// `text` after `keyword` (any case) and the space after it.
fn strip_keyword<'a>(text: &'a str, keyword: &str) -> Option<&'a str> {
    let text = text.trim_start();
    let head = text.get(..keyword.len())?;
    head.eq_ignore_ascii_case(keyword)
        .then(|| &text[keyword.len()..])
}

/// A table name (`name` or `` `name` ``, after an optional `IF NOT
/// EXISTS`) and what follows it.
fn identifier(text: &str) -> anyhow::Result<(String, &str)> {
    let text = strip_keyword(text, "IF NOT EXISTS")
        .unwrap_or(text)
        .trim_start();
    let (name, rest) = match text.strip_prefix('`') {
        Some(quoted) => {
            let end = quoted.find('`').context("an unclosed table name")?;
            (&quoted[..end], &quoted[end + 1..])
        }
        None => {
            let end = text
                .find(|c: char| c.is_whitespace() || c == '(')
                .unwrap_or(text.len());
            (&text[..end], &text[end..])
        }
    };
    Ok((name.to_owned(), rest))
}

/// The column names of a `CREATE TABLE` body, in order: its lines that
/// start with a quoted name (keys and constraints do not).
fn create_columns(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|line| {
            let line = line.trim_start().strip_prefix('`')?;
            Some(line[..line.find('`')?].to_owned())
        })
        .collect()
}

/// The tuples of `VALUES (...),(...);` (NULL as `None`) and what follows.
fn values(mut text: &str) -> anyhow::Result<(Vec<Vec<Option<String>>>, &str)> {
    let mut tuples = Vec::new();
    loop {
        text = text.trim_start();
        let Some(inner) = text.strip_prefix('(') else {
            bail!("expected a row of values `(...)`, found {:?}", head(text));
        };
        let (tuple, after) = tuple(inner)?;
        tuples.push(tuple);
        text = after.trim_start();
        if let Some(after) = text.strip_prefix(',') {
            text = after;
        } else if let Some(after) = text.strip_prefix(';') {
            return Ok((tuples, after));
        } else {
            return Ok((tuples, text));
        }
    }
}

/// One row's values up to its `)`: quoted strings with MySQL's escapes,
/// numbers, NULL.
fn tuple(mut text: &str) -> anyhow::Result<(Vec<Option<String>>, &str)> {
    let mut values = Vec::new();
    loop {
        text = text.trim_start();
        if let Some(quoted) = text.strip_prefix('\'') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next() {
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, 'r')) => value.push('\r'),
                        Some((_, 't')) => value.push('\t'),
                        Some((_, '0')) => value.push('\0'),
                        Some((_, 'Z')) => value.push('\u{1a}'),
                        Some((_, other)) => value.push(other),
                        None => bail!("an unclosed string"),
                    },
                    Some((at, '\'')) => {
                        if quoted[at + 1..].starts_with('\'') {
                            value.push('\'');
                            chars.next();
                        } else {
                            break at + 1;
                        }
                    }
                    Some((_, other)) => value.push(other),
                    None => bail!("an unclosed string"),
                }
            };
            values.push(Some(value));
            text = &quoted[end..];
        } else {
            let end = bare_end(text).context("an unclosed row of values")?;
            let bare = text[..end].trim();
            values.push((!bare.eq_ignore_ascii_case("NULL")).then(|| bare.to_owned()));
            text = &text[end..];
        }
        text = text.trim_start();
        if let Some(after) = text.strip_prefix(',') {
            text = after;
        } else if let Some(after) = text.strip_prefix(')') {
            return Ok((values, after));
        } else {
            bail!("expected , or ) in a row of values, found {:?}", head(text));
        }
    }
}

/// The start of `text`, to show where reading stopped.
fn head(text: &str) -> String {
    text.chars().take(40).collect()
}

/// Where an unquoted value ends (at the `,` or `)` after it): a number,
/// `NULL`, or a call such as `now()` or `CURRENT_TIMESTAMP(3)`, kept as
/// its text.
fn bare_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            ',' | ')' if depth == 0 => return Some(at),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_is_read_by_its_create_table_and_mysql_escapes() {
        let dump = "-- MySQL dump\n\
            DROP TABLE IF EXISTS `xxl_job_group`;\n\
            CREATE TABLE `xxl_job_group` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  `app_name` varchar(64) NOT NULL,\n  `title` varchar(12) NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB;\n\
            INSERT INTO `xxl_job_group` VALUES (1,'sample','it\\'s a \\\"test\\\"'),(2,'two','a,b)c');\n\
            INSERT INTO `xxl_job_info` (`id`,`job_desc`,`glue_source`) VALUES (7,'x',NULL);\n";
        let tables = read_dump(dump).unwrap();
        let groups = &tables[GROUP_TABLE];
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0]["title"], "it's a \"test\"");
        assert_eq!(groups[1]["title"], "a,b)c");
        let jobs = &tables[JOB_TABLE];
        assert_eq!(jobs[0]["job_desc"], "x");
        assert!(!jobs[0].contains_key("glue_source"));
    }

    #[test]
    fn csv_and_json_exports_are_read_with_null_left_out() {
        let csv = read_csv("id,app_name,title\n1,sample,\"a, b\"\n2,two,NULL\n").unwrap();
        assert_eq!(csv[0]["title"], "a, b");
        assert!(!csv[1].contains_key("title"));
        let json = read_json(r#"[{"id": 3, "app_name": "x", "title": null}]"#).unwrap();
        assert_eq!(json[0]["id"], "3");
        assert!(!json[0].contains_key("title"));
        assert!(read_json(r#"{"a": 1}"#).is_err());
    }

    #[test]
    fn ignore_and_replace_inserts_and_calls_as_values_are_read() {
        let dump = "CREATE TABLE `xxl_job_group` (\n  `id` int,\n  `app_name` varchar(64),\n  `update_time` datetime\n);\n\
            INSERT IGNORE INTO `xxl_job_group` VALUES (1,'a',now());\n\
            REPLACE INTO `xxl_job_group` VALUES (2,'b',CURRENT_TIMESTAMP(3)),(3,'c',NULL);\n";
        let groups = &read_dump(dump).unwrap()[GROUP_TABLE];
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[0]["update_time"], "now()");
        assert_eq!(groups[1]["app_name"], "b");
        assert!(!groups[2].contains_key("update_time"));
    }

    #[test]
    fn a_dump_that_does_not_read_names_its_line_and_what_was_expected() {
        let dump = "-- a dump\nCREATE TABLE `xxl_job_group` (\n  `id` int\n);\n\n\
            INSERT INTO `xxl_job_group` VALUES (1),[2];\n";
        let error = format!("{:#}", read_dump(dump).unwrap_err());
        assert!(
            error.starts_with("line 6: in the INSERT into xxl_job_group: expected a row of values"),
            "{error}"
        );
        assert!(error.contains("found \"[2];"), "{error}");
    }

    #[test]
    fn a_mariadb_batch_export_is_read_with_its_escapes() {
        let tsv = "id\tjob_desc\texecutor_param\n\
            1\ta\\tb\t two\\nlines \\\\ \n\
            2\tb\tNULL\n\
            3\tc\t\\N\n";
        let rows = read_tsv(tsv).unwrap();
        assert_eq!(rows[0]["job_desc"], "a\tb");
        assert_eq!(rows[0]["executor_param"], " two\nlines \\ ");
        assert!(!rows[1].contains_key("executor_param"));
        assert!(!rows[2].contains_key("executor_param"));
        let error = read_tsv("id\tjob_desc\n1\n").unwrap_err().to_string();
        assert_eq!(error, "line 2: 1 fields for 2 columns");
    }

    #[test]
    fn a_csv_with_a_byte_order_mark_and_crlf_reads_and_one_of_other_columns_without_a_header_is_refused()
     {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("xxl_job_group.csv");
        std::fs::write(&path, "\u{feff}id,app_name\r\n1,\"a, b\"\r\n").unwrap();
        let mut tables = Tables::default();
        tables.read(&path, true).unwrap();
        assert_eq!(tables.groups[0]["id"], "1");
        assert_eq!(tables.groups[0]["app_name"], "a, b");
        std::fs::write(&path, "1,orders\n2,reports\n").unwrap();
        let error = format!("{:#}", tables.read(&path, true).unwrap_err());
        assert!(
            error.contains("line 1: a row without a header") && error.contains("7 or 6"),
            "{error}"
        );
        std::fs::write(&path, "id,app_name\n1,a\n2,x,y\n").unwrap();
        let error = format!("{:#}", tables.read(&path, true).unwrap_err());
        assert!(
            error.contains("xxl_job_group.csv") && error.contains("line 3"),
            "{error}"
        );
    }
}
