//! Posts `{"text": <param>}` to the URL in configuration key `url`, with
//! the tenant's secret `NOTIFY_TOKEN` as a bearer token: a chat or
//! incident webhook called on a schedule.

use cronbox_guest::{Context, Job, Result, anyhow, bail, export_job, http::Request, info};

#[derive(Default)]
struct Notify;

impl Job for Notify {
    fn execute(&mut self, ctx: &Context) -> Result<String> {
        let url = ctx
            .config("url")
            .ok_or_else(|| anyhow!("set the webhook URL in configuration key `url`"))?;
        let token = ctx
            .secret("NOTIFY_TOKEN")
            .ok_or_else(|| anyhow!("reference the secret NOTIFY_TOKEN in the job's definition"))?;
        let body = format!("{{\"text\": {}}}", json_string(ctx.param()));
        let response = Request::post(&url)
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {token}"))
            .body(body)
            .send()?;
        info!("posted to {url}: {}", response.status);
        if !(200..300).contains(&response.status) {
            bail!("the webhook answered {}", response.status);
        }
        Ok(format!("notified ({})", response.status))
    }
}

/// `text` as a JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

export_job!(Notify);
