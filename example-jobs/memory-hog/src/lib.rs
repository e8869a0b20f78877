use cronbox_guest::{Context, Job, Result, export_job, info};

#[derive(Default)]
struct MemoryHog {
    hoard: Vec<Vec<u8>>,
}

impl Job for MemoryHog {
    fn execute(&mut self, _ctx: &Context) -> Result<String> {
        const CHUNK: usize = 1 << 20;
        loop {
            // Touch every page so the memory is really used.
            self.hoard.push(vec![0xA5; CHUNK]);
            if self.hoard.len() % 16 == 0 {
                info!("holding {} MiB", self.hoard.len());
            }
        }
    }
}
export_job!(MemoryHog);
