use cronbox_guest::{Context, Job, Result, export_job, info};

#[derive(Default)]
struct FuelBurner;

impl Job for FuelBurner {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let rounds: u64 = ctx.param().trim().parse().map_err(|error| {
            cronbox_guest::anyhow!(
                "param must be a number of rounds, got {:?}: {error}",
                ctx.param()
            )
        })?;
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..rounds {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        let x = std::hint::black_box(x);
        info!("{rounds} rounds done");
        Ok(format!("rounds={rounds} result={x:016x}"))
    }
}
export_job!(FuelBurner);
