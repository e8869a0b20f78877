use cronbox_guest::{Context, Job, Result, export_job};

#[derive(Default)]
struct Panicker;

#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    std::hint::black_box(recurse(std::hint::black_box(depth + 1))) + 1
}

impl Job for Panicker {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        match ctx.param() {
            "overflow" => Ok(format!("{}", recurse(0))),
            "unreachable" => std::process::abort(),
            other => panic!("panicking on purpose (param {other:?})"),
        }
    }
}
export_job!(Panicker);
