use cronbox_guest::{Context, Job, Result, export_job, http::Request, info};

#[derive(Default)]
struct HttpFetch;

impl Job for HttpFetch {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let response = Request::get(ctx.param()).send()?;
        info!("GET {} answered {}", ctx.param(), response.status);
        Ok(format!("status {}, {} bytes", response.status, response.body.len()))
    }
}
export_job!(HttpFetch);
