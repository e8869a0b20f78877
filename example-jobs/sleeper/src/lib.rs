use cronbox_guest::{Context, Job, Result, export_job, info};

#[derive(Default)]
struct Sleeper;

impl Job for Sleeper {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let millis: u64 = ctx.param().trim().parse().unwrap_or(60_000);
        info!("sleeping {millis} ms");
        std::thread::sleep(std::time::Duration::from_millis(millis));
        Ok(format!("slept {millis} ms"))
    }
}
export_job!(Sleeper);
