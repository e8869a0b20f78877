//! Reads the job's configuration through `wasi:config/store`: succeeds
//! with the value of the key its param names, fails when it is not set.

use cronbox_guest::{Context, Job, Result, anyhow, export_job, info};

#[derive(Default)]
struct ConfigEcho;

impl Job for ConfigEcho {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let key = ctx.param();
        let value = ctx
            .config(key)
            .ok_or_else(|| anyhow!("no configuration {key:?}"))?;
        info!("{key} = {value}");
        Ok(value)
    }
}
export_job!(ConfigEcho);
