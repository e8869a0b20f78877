//! Handles its shard of a SHARDING_BROADCAST fire. With the parameter
//! `fail-shard=N`, shard N fails on its first attempt (and succeeds when
//! retried), to show that a retry reruns that shard only.

use cronbox_guest::{Context, Job, Result, bail, export_job, info};

#[derive(Default)]
struct Sharded;

impl Job for Sharded {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let shard = ctx.shard();
        info!("handling shard {} of {}", shard.index, shard.total);
        let failing = ctx
            .param()
            .strip_prefix("fail-shard=")
            .and_then(|index| index.parse::<u32>().ok());
        if failing == Some(shard.index) && ctx.attempt() == 0 {
            bail!("shard {} fails its first attempt on purpose", shard.index);
        }
        Ok(format!("shard {}/{}", shard.index, shard.total))
    }
}

export_job!(Sharded);
