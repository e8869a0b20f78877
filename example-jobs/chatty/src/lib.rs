use cronbox_guest::{Context, Job, Result, export_job, info, warn};

#[derive(Default)]
struct Chatty;

impl Job for Chatty {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let lines: u64 = ctx.param().trim().parse().unwrap_or(100_000);
        let pause_every: u64 = 1_000;
        for i in 0..lines {
            match i % 3 {
                0 => println!("stdout line {i}"),
                1 => eprintln!("stderr line {i}"),
                _ => info!("log line {i}"),
            }
            if i % pause_every == pause_every - 1 {
                warn!("{} lines so far", i + 1);
                // Give live readers something to page through.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        Ok(format!("wrote {lines} lines"))
    }
}
export_job!(Chatty);
