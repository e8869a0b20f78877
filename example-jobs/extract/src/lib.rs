//! The first step of the example ETL workflow (`example-jobs/etl`): makes
//! `param` records (3 by default) and returns them as a structured output,
//! `{"count": N, "items": [{"id": 1, "name": "..."}, ...]}`, which the
//! workflow fans out over. A param of `broken` makes a record without a
//! name, which the next step refuses (to see the failure path).

use cronbox_guest::{Context, Job, Result, anyhow, export_job, info, json, output};

const NAMES: &[&str] = &["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];

#[derive(Default)]
struct Extract;

impl Job for Extract {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let param = ctx.param().trim();
        let broken = param == "broken";
        let count: usize = match param {
            "" | "broken" => 3,
            text => text
                .parse()
                .map_err(|error| anyhow!("param must be a count of records, got {text:?}: {error}"))?,
        };
        let items: Vec<_> = (0..count)
            .map(|i| match (broken && i == count - 1, NAMES.get(i % NAMES.len())) {
                (true, _) => json!({ "id": i + 1 }),
                (false, name) => json!({ "id": i + 1, "name": name }),
            })
            .collect();
        info!("extracted {count} records");
        output(&json!({ "count": count, "items": items }))
    }
}
export_job!(Extract);
