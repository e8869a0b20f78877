use cronbox_guest::{Context, Job, Result, export_job, info};

#[derive(Default)]
struct Hello;

impl Job for Hello {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        info!("hello, {}", ctx.param());
        Ok(format!("hello, {}", ctx.param()))
    }
}
export_job!(Hello);
