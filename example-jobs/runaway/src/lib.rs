use cronbox_guest::{Context, Job, Result, export_job, info};

#[derive(Default)]
struct Runaway;

impl Job for Runaway {
    fn execute(&mut self, _ctx: &Context) -> Result<String> {
        info!("spinning forever");
        let mut x: u64 = 1;
        loop {
            // Keep the loop observable so the compiler cannot remove it.
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}
export_job!(Runaway);
