use std::io::Write as _;

use cronbox_guest::{Context, Job, Result, export_job, info, warn};

#[derive(Default)]
struct Chatty;

impl Job for Chatty {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        // `big:N`: one log line and a result message of N bytes each.
        if let Some(size) = ctx.param().trim().strip_prefix("big:") {
            let size: usize = size.parse().unwrap_or(1 << 20);
            let text = "x".repeat(size);
            info!("{text}");
            return Ok(text);
        }
        // `empty:N`: a flood of empty lines — N newlines on stdout, in large
        // writes, and N/10 empty `context.log` lines.
        if let Some(count) = ctx.param().trim().strip_prefix("empty:") {
            let lines: usize = count.parse().unwrap_or(1_000_000);
            let chunk = vec![b'\n'; 64 << 10];
            let mut left = lines;
            let mut stdout = std::io::stdout();
            while left > 0 {
                let now = left.min(chunk.len());
                let _ = stdout.write_all(&chunk[..now]);
                left -= now;
            }
            for _ in 0..lines / 10 {
                info!("");
            }
            return Ok(format!("wrote {lines} empty lines"));
        }
        // `clocks`: how finely this guest can tell time apart — the
        // sub-millisecond remainders it sees on both clocks.
        if ctx.param().trim() == "clocks" {
            let start = std::time::Instant::now();
            let mut finest = 0_u128;
            for _ in 0..10_000 {
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                finest = finest.max(wall.as_nanos() % 1_000_000);
                finest = finest.max(start.elapsed().as_nanos() % 1_000_000);
            }
            return Ok(format!("sub-millisecond remainder {finest} ns"));
        }
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
