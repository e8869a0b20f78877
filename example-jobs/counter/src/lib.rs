//! Counts its runs in durable state and the runs of this instance in memory.

use cronbox_guest::{Context, Job, Result, export_job, info};

#[derive(Default)]
struct Counter {
    /// Runs served by this instance (lost when the instance is retired).
    runs_here: u64,
}

impl Job for Counter {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let count: u64 = match ctx.get("count") {
            Some(text) => text.parse()?,
            None => 0,
        } + 1;
        ctx.set("count", &count.to_string())?;
        self.runs_here += 1;
        if ctx.param() == "fail" {
            cronbox_guest::bail!("failing on purpose after counting {count}");
        }
        info!("count is now {count}");
        Ok(format!("count={count} instance_runs={}", self.runs_here))
    }

    fn destroy(&mut self) {
        info!("counter instance retired after {} runs", self.runs_here);
    }
}
export_job!(Counter);
