//! The plan of an import, from rows as the readers give them.

use super::*;

fn row(pairs: &[(&str, &str)]) -> Row {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn bean_jobs_map_glue_jobs_are_refused_and_existing_ones_are_found() {
    let tables = Tables {
        groups: vec![row(&[("id", "1"), ("app_name", "orders")])],
        jobs: vec![
            row(&[
                ("id", "10"),
                ("job_group", "1"),
                ("job_desc", "report"),
                ("schedule_type", "CRON"),
                ("schedule_conf", "0 0 2 * * ?"),
                ("executor_handler", "reportHandler"),
                ("executor_timeout", "30"),
                ("glue_type", "BEAN"),
                ("trigger_status", "1"),
                ("child_jobid", "11"),
                ("alarm_email", "ops@example.com"),
            ]),
            row(&[
                ("id", "11"),
                ("job_group", "1"),
                ("job_desc", "shell"),
                ("glue_type", "GLUE_SHELL"),
            ]),
            row(&[
                ("id", "12"),
                ("job_group", "1"),
                ("job_desc", "sweep"),
                ("schedule_type", "FIX_RATE"),
                ("schedule_conf", "60"),
                ("executor_handler", "sweep"),
                ("executor_timeout", "0"),
            ]),
            row(&[("id", "13"), ("job_group", "9"), ("job_desc", "orphan")]),
        ],
    };
    let options = Options {
        zone: "Asia/Shanghai".into(),
        access_token: Some("token-from-flag".into()),
        ..Options::default()
    };
    let existing = HashMap::from([(("orders".to_owned(), "sweep".to_owned()), JobId::from(5))]);
    let plan = plan(&tables, &[], &existing, &options);
    assert_eq!(plan.groups.len(), 1);
    assert_eq!(
        plan.groups[0].access_token.as_deref(),
        Some("token-from-flag")
    );
    let [report, shell, sweep, orphan] = <[_; 4]>::try_from(plan.jobs).unwrap();
    let spec = report.spec.unwrap();
    assert_eq!(report.action, Action::Create);
    assert_eq!(
        (spec.timeout_ms, spec.time_zone.as_str()),
        (30_000, "Asia/Shanghai")
    );
    assert_eq!(spec.executor_handler.as_deref(), Some("reportHandler"));
    assert!(report.start);
    // Its child is the GLUE job, refused: not linked, and said so.
    assert!(report.children.is_empty());
    assert!(
        report
            .notes
            .contains(&"child job 11 not linked: it is refused".to_owned()),
        "{:?}",
        report.notes
    );
    assert!(
        report.notes[0].contains("alarm_email"),
        "{:?}",
        report.notes
    );
    assert!(matches!(shell.action, Action::Refused(why) if why.contains("module")));
    assert_eq!(sweep.action, Action::Exists(JobId::from(5)));
    assert!(matches!(orphan.action, Action::Refused(why) if why.contains("job_group 9")));
}

fn planned(jobs: Vec<Row>) -> Vec<PlannedJob> {
    let tables = Tables {
        groups: vec![row(&[("id", "1"), ("app_name", "orders")])],
        jobs,
    };
    let options = Options {
        zone: "UTC".into(),
        access_token: Some("token".into()),
        ..Options::default()
    };
    plan(&tables, &[], &HashMap::new(), &options).jobs
}

fn bean(id: &str, desc: &str, extra: &[(&str, &str)]) -> Row {
    let mut row = row(&[
        ("id", id),
        ("job_group", "1"),
        ("job_desc", desc),
        ("executor_handler", "h"),
        ("glue_type", "BEAN"),
    ]);
    row.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    row
}

#[test]
fn params_and_names_come_across_byte_for_byte_or_say_what_changed() {
    let long = "报表".repeat(60);
    let longer = format!("{long}, and more");
    let jobs = planned(vec![
        bean("1", " padded name ", &[("executor_param", "  a\tb\n ")]),
        bean("2", "NULL", &[("executor_param", "NULL")]),
        bean("3", "", &[]),
        bean("4", &long, &[]),
        bean("5", &longer, &[]),
        bean("6", "tab\there", &[]),
    ]);
    let spec = |at: usize| jobs[at].spec.as_ref().unwrap();
    assert_eq!(jobs[0].name, " padded name ");
    assert_eq!(spec(0).param, "  a\tb\n ");
    assert!(
        !jobs[0].notes.iter().any(|note| note.contains("named")),
        "{:?}",
        jobs[0].notes
    );
    assert_eq!(
        (jobs[1].name.as_str(), spec(1).param.as_str()),
        ("NULL", "NULL")
    );
    assert_eq!(spec(2).param, "", "a NULL param is none");
    assert_eq!(jobs[2].name, "xxl-job #3");
    assert!(jobs[2].notes[0].contains("blank"), "{:?}", jobs[2].notes);
    // Two long names that share their first 200 bytes stay two names.
    assert_ne!(jobs[3].name, jobs[4].name);
    for job in &jobs[3..5] {
        assert!(job.name.len() <= NAME_BYTES, "{}", job.name);
        assert!(job.name.ends_with(&format!(" #{}", job.xxl_id)));
        assert!(
            job.notes[0].contains("over cronbox's 200"),
            "{:?}",
            job.notes
        );
    }
    assert_eq!(jobs[5].name, "tab here #6");
    assert!(jobs[5].notes[0].contains("control characters"));
}

#[test]
fn a_cycle_of_child_jobs_is_linked_up_to_the_link_that_would_close_it() {
    let jobs = planned(vec![
        bean("1", "a", &[("child_jobid", "2,9")]),
        bean("2", "b", &[("child_jobid", "3")]),
        bean("3", "c", &[("child_jobid", "1,4")]),
        row(&[
            ("id", "4"),
            ("job_group", "1"),
            ("job_desc", "d"),
            ("glue_type", "GLUE_SHELL"),
        ]),
    ]);
    assert_eq!(jobs[0].children, [2]);
    assert!(
        jobs[0]
            .notes
            .iter()
            .any(|note| note == "child job 9 not linked: it is not in the export")
    );
    assert_eq!(jobs[1].children, [3]);
    assert!(jobs[2].children.is_empty());
    assert!(
        jobs[2]
            .notes
            .iter()
            .any(|note| note.contains("child job 1 not linked: it would close a cycle")),
        "{:?}",
        jobs[2].notes
    );
    assert!(
        jobs[2]
            .notes
            .iter()
            .any(|note| note == "child job 4 not linked: it is refused")
    );
}
