use cronbox_guest::{Context, Job, Result, export_job, info};

#[derive(Default)]
struct Sharded;

impl Job for Sharded {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let shard = ctx.shard();
        info!("handling shard {} of {}", shard.index, shard.total);
        Ok(format!("shard {}/{}", shard.index, shard.total))
    }
}
export_job!(Sharded);
