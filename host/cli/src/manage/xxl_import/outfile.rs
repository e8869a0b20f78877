//! What `SELECT * FROM TABLE INTO OUTFILE 'FILE'` writes: no header, the
//! table's columns in its schema's order (xxl-job's own, 3.5's or an
//! earlier release's, told by their number), fields between tabs (the
//! default) or commas (`FIELDS TERMINATED BY ','`), each optionally in
//! double quotes (`[OPTIONALLY] ENCLOSED BY '"'`), lines ending in LF
//! (MySQL's default `LINES TERMINATED BY`). With MySQL's default `ESCAPED BY '\\'`, NULL is `\N` and a
//! backslash comes before the separator, a quote, a line end, NUL (`\0`)
//! and itself; with `ESCAPED BY ''` nothing is escaped and NULL is `NULL`
//! (`--escaped-by ''` says so). Read as `LOAD DATA` reads it back.

use anyhow::{Context, bail};

use super::tables::Row;

/// `xxl_job_info`'s columns in every release since 2.3 (3.5 renamed
/// `job_desc` to `name`; both are read).
const JOB_COLUMNS: [&str; 24] = [
    "id",
    "job_group",
    "job_desc",
    "add_time",
    "update_time",
    "author",
    "alarm_email",
    "schedule_type",
    "schedule_conf",
    "misfire_strategy",
    "executor_route_strategy",
    "executor_handler",
    "executor_param",
    "executor_block_strategy",
    "executor_timeout",
    "executor_fail_retry_count",
    "glue_type",
    "glue_source",
    "glue_remark",
    "glue_updatetime",
    "child_jobid",
    "trigger_status",
    "trigger_last_time",
    "trigger_next_time",
];

/// `xxl_job_group`'s columns in 3.5 (with its `access_token`).
const GROUP_COLUMNS_35: [&str; 7] = [
    "id",
    "app_name",
    "name",
    "address_type",
    "address_list",
    "access_token",
    "update_time",
];

/// `xxl_job_group`'s columns before 3.5.
const GROUP_COLUMNS_34: [&str; 6] = [
    "id",
    "app_name",
    "title",
    "address_type",
    "address_list",
    "update_time",
];

/// The columns of `table` (`xxl_job_info` or `xxl_job_group`) in a schema
/// with `count` of them.
fn columns_of(table: &str, count: usize) -> Option<&'static [&'static str]> {
    match (table, count) {
        ("xxl_job_info", 24) => Some(&JOB_COLUMNS),
        ("xxl_job_group", 7) => Some(&GROUP_COLUMNS_35),
        ("xxl_job_group", 6) => Some(&GROUP_COLUMNS_34),
        _ => None,
    }
}

/// Whether `text` starts with a row rather than a header of names: its
/// first field is a number (an id).
pub fn starts_with_a_row(text: &str) -> bool {
    let first: String = text
        .trim_start_matches('"')
        .chars()
        .take_while(|c| !matches!(c, '\t' | ',' | '"' | '\n' | '\r'))
        .collect();
    !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit())
}

/// The rows of `table` in `text`, written by `INTO OUTFILE` with
/// backslash escapes (`escaped`) or none; NULL values left out.
pub fn read(text: &str, table: &str, escaped: bool) -> anyhow::Result<Vec<Row>> {
    let mut failures = Vec::new();
    for separator in ['\t', ','] {
        let records = match records(text, separator, escaped) {
            Ok(records) => records,
            Err(error) => {
                failures.push(error);
                continue;
            }
        };
        let count = records.first().map_or(0, |(_, fields)| fields.len());
        let Some(columns) = columns_of(table, count) else {
            continue;
        };
        let mut rows = Vec::with_capacity(records.len());
        for (line, fields) in records {
            if fields.len() != columns.len() {
                bail!(
                    "line {line}: {} fields; {table} has {} columns",
                    fields.len(),
                    columns.len()
                );
            }
            rows.push(
                columns
                    .iter()
                    .zip(fields)
                    .filter_map(|(column, value)| Some(((*column).to_owned(), value?)))
                    .collect(),
            );
        }
        return Ok(rows);
    }
    if let Some(error) = failures.pop() {
        return Err(error);
    }
    let expected = match table {
        "xxl_job_info" => "24 (xxl-job's xxl_job_info)",
        _ => "7 or 6 (xxl-job 3.5's xxl_job_group, or an earlier release's)",
    };
    bail!(
        "line 1: a row without a header (SELECT * ... INTO OUTFILE), but not of {expected} \
         fields between tabs or commas: export the whole table, or with a header line"
    )
}

/// Each record of `text` with the line it starts on: its fields, `None`
/// for NULL.
fn records(
    text: &str,
    separator: char,
    escaped: bool,
) -> anyhow::Result<Vec<(usize, Vec<Option<String>>)>> {
    let mut records = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while chars.peek().is_some() {
        let start = line;
        let mut fields = Vec::new();
        loop {
            let (field, ended) = field(&mut chars, &mut line, separator, escaped)
                .with_context(|| format!("line {line}"))?;
            fields.push(field);
            if ended {
                break;
            }
        }
        if fields != [Some(String::new())] {
            records.push((start, fields));
        }
    }
    Ok(records)
}

/// One field, and whether it ended its record.
fn field(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    line: &mut usize,
    separator: char,
    escaped: bool,
) -> anyhow::Result<(Option<String>, bool)> {
    let enclosed = chars.peek() == Some(&'"');
    if enclosed {
        chars.next();
    }
    let mut value = String::new();
    let mut any_escape = false;
    loop {
        let Some(c) = chars.next() else {
            if enclosed {
                bail!("a quoted field does not end");
            }
            return Ok((null_or(value, escaped, any_escape, enclosed), true));
        };
        if c == '\n' {
            *line += 1;
        }
        match c {
            '\\' if escaped => {
                let next = chars.next().context("a backslash ends the file")?;
                if next == '\n' {
                    *line += 1;
                }
                any_escape = true;
                value.push(match next {
                    '0' => '\0',
                    'b' => '\u{8}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'Z' => '\u{1a}',
                    'N' if value.is_empty() && !enclosed => {
                        return null_field(chars, line, separator);
                    }
                    other => other,
                });
            }
            // A quote ends the field only before a separator or a line end
            // (unescaped output writes a quote inside a field as it is).
            '"' if enclosed => match chars.peek() {
                Some(next) if *next == separator => {
                    chars.next();
                    return Ok((Some(value), false));
                }
                Some('\n') | None => {
                    if chars.next().is_some() {
                        *line += 1;
                    }
                    return Ok((Some(value), true));
                }
                Some(_) => value.push('"'),
            },
            c if c == separator && !enclosed => {
                return Ok((null_or(value, escaped, any_escape, enclosed), false));
            }
            '\n' if !enclosed => {
                return Ok((null_or(value, escaped, any_escape, enclosed), true));
            }
            c => value.push(c),
        }
    }
}

/// `\N`, read: NULL, once the field's end is there.
fn null_field(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    line: &mut usize,
    separator: char,
) -> anyhow::Result<(Option<String>, bool)> {
    match chars.next() {
        None => Ok((None, true)),
        Some('\n') => {
            *line += 1;
            Ok((None, true))
        }
        Some(c) if c == separator => Ok((None, false)),
        Some(c) => bail!("\\N followed by {c:?}: NULL is a field of its own"),
    }
}

/// A field's value: NULL when unescaped output wrote it `NULL`.
fn null_or(value: String, escaped: bool, any_escape: bool, enclosed: bool) -> Option<String> {
    (escaped || any_escape || enclosed || value != "NULL").then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_line(param: &str) -> String {
        let mut fields = vec!["7", "1", "nightly"];
        fields.extend(["\\N"; 9]);
        fields.push(param);
        fields.extend(["\\N"; 11]);
        fields.join("\t")
    }

    #[test]
    fn a_default_outfile_is_read_with_its_escapes_and_nulls() {
        let text = format!("{}\n{}\n", job_line(" a\\\tb\\\nc\\\\ "), job_line("\\N"));
        assert!(starts_with_a_row(&text));
        let rows = read(&text, "xxl_job_info", true).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["executor_param"], " a\tb\nc\\ ");
        assert_eq!(rows[0]["job_desc"], "nightly");
        assert!(!rows[1].contains_key("executor_param"), "\\N is NULL");
    }

    #[test]
    fn a_csv_outfile_with_quotes_and_without_escapes_is_read() {
        let quoted = "1,\"orders\",\"订单\",0,\\N,\"tok,en\",\"2026-11-01\"\n\
                      2,\"say \\\"hi\\\"\",\"b\",0,\\N,\"t\",\"2026-11-01\"\n";
        let rows = read(quoted, "xxl_job_group", true).unwrap();
        assert_eq!(rows[0]["access_token"], "tok,en");
        assert_eq!(rows[1]["app_name"], "say \"hi\"");
        assert!(!rows[0].contains_key("address_list"));
        let bare = "1,\"a\\b\",\"say \"hi\"\",0,NULL,\"NULL\"\n";
        let rows = read(bare, "xxl_job_group", false).unwrap();
        assert_eq!(rows[0]["app_name"], "a\\b");
        assert_eq!(rows[0]["title"], "say \"hi\"");
        assert!(!rows[0].contains_key("address_list"), "NULL is NULL");
        assert_eq!(rows[0]["update_time"], "NULL", "a quoted NULL is text");
    }

    #[test]
    fn an_outfile_of_other_columns_is_refused_naming_what_was_expected() {
        let error = read("1\t2\t3\n", "xxl_job_info", true).unwrap_err();
        assert!(format!("{error:#}").contains("24"), "{error:#}");
    }
}
