//! xxl-job's wire format, both release lines: what its executors send the
//! admin (registrations, results) and what the admin sends them (runs,
//! probes, kills, log reads), with the `{code, msg, content | data}`
//! envelope every answer is wrapped in. Field names are xxl-job's own
//! (`xxl-job-core`'s `TriggerParam`/`TriggerRequest`, `HandleCallbackParam`/
//! `CallbackData`, `RegistryParam`, `LogParam`/`LogResult`).

use cronbox_api::LegacyProtocol;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The header xxl-job's executors and admin put their access token in.
pub const TOKEN_HEADER: &str = "XXL-JOB-ACCESS-TOKEN";
/// The header xxl-job 3.5 names the calling executor's appname in.
pub const APPNAME_HEADER: &str = "XXL-JOB-APPNAME";

/// Every answer: `code` 200 is success. Before xxl-job 3.3 the payload
/// was `content`, since then `data`: both are written, and either read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Envelope {
    pub code: i64,
    #[serde(default)]
    pub msg: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl Envelope {
    pub fn ok() -> Envelope {
        Envelope {
            code: 200,
            ..Envelope::default()
        }
    }

    /// A refusal as xxl-job answers one: HTTP 200 with code 500 inside.
    pub fn refused(message: impl Into<String>) -> Envelope {
        Envelope {
            code: 500,
            msg: Some(message.into()),
            ..Envelope::default()
        }
    }

    /// Success, or a refusal naming the error.
    pub fn of<T, E: std::fmt::Display>(result: Result<T, E>) -> Envelope {
        match result {
            Ok(_) => Envelope::ok(),
            Err(error) => Envelope::refused(error.to_string()),
        }
    }

    /// The payload, from `data` or the older `content`.
    pub fn payload(self) -> Option<Value> {
        self.data.or(self.content)
    }
}

/// `api/registry` and `api/registryRemove`: an executor of appname
/// `registry_key` at `registry_value`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    #[serde(default)]
    pub registry_group: String,
    #[serde(default)]
    pub registry_key: String,
    #[serde(default)]
    pub registry_value: String,
}

/// One result in `api/callback`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallbackItem {
    pub log_id: u64,
    /// `logDateTim` up to 3.4, `logDateTime` in 3.5.
    #[serde(default, alias = "logDateTim")]
    pub log_date_time: Option<i64>,
    #[serde(default)]
    pub handle_code: Option<i64>,
    #[serde(default)]
    pub handle_msg: Option<String>,
    /// How xxl-job 2.2 and older carried the code and message.
    #[serde(default)]
    pub execute_result: Option<ExecuteResult>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExecuteResult {
    pub code: i64,
    #[serde(default)]
    pub msg: Option<String>,
}

impl CallbackItem {
    /// The handler's code: 200 success, 502 timeout, anything else a
    /// failure.
    pub fn code(&self) -> i64 {
        self.handle_code
            .or(self.execute_result.as_ref().map(|result| result.code))
            .unwrap_or(500)
    }

    pub fn message(&self) -> String {
        self.handle_msg
            .clone()
            .or_else(|| self.execute_result.as_ref().and_then(|r| r.msg.clone()))
            .unwrap_or_default()
    }
}

/// `api/callback`'s body in either line: a bare list (up to 3.4) or
/// `{"callbackList": [...]}` (3.5).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Callback {
    List(Vec<CallbackItem>),
    Wrapped {
        #[serde(rename = "callbackList")]
        callback_list: Vec<CallbackItem>,
    },
}

impl Callback {
    pub fn items(self) -> Vec<CallbackItem> {
        match self {
            Callback::List(items)
            | Callback::Wrapped {
                callback_list: items,
            } => items,
        }
    }
}

/// A run sent to an executor (`/run`, or `/trigger` in 3.5).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trigger<'a> {
    pub job_id: u64,
    pub executor_handler: &'a str,
    pub executor_params: &'a str,
    pub executor_block_strategy: &'a str,
    /// Seconds; 0 is none.
    pub executor_timeout: i64,
    pub log_id: u64,
    pub log_date_time: i64,
    pub glue_type: &'static str,
    pub glue_source: &'static str,
    pub glue_updatetime: i64,
    pub broadcast_index: i64,
    pub broadcast_total: i64,
}

/// `/idleBeat` and `/kill`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobRef {
    pub job_id: u64,
}

/// `/log`: lines of a run's log from `from_line_num` (1-based).
#[derive(Debug, Clone, Serialize)]
pub struct LogRequest {
    #[serde(rename = "logId")]
    pub log_id: u64,
    /// `logDateTim` (sic) up to 3.4 and `logDateTime` in 3.5: both sent.
    #[serde(rename = "logDateTim")]
    pub log_date_tim: i64,
    #[serde(rename = "logDateTime")]
    pub log_date_time: i64,
    #[serde(rename = "fromLineNum")]
    pub from_line_num: i64,
}

/// `/log`'s payload.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LogPage {
    #[serde(rename = "fromLineNum", default)]
    pub from_line_num: i64,
    #[serde(rename = "toLineNum", default)]
    pub to_line_num: i64,
    #[serde(rename = "logContent", default)]
    pub log_content: Option<String>,
    /// `isEnd` as executors write it (`end` once re-serialised by xxl-job's
    /// admin).
    #[serde(rename = "isEnd", alias = "end", default)]
    pub is_end: bool,
}

/// The executor's path for a run, by release line.
pub fn trigger_path(protocol: LegacyProtocol) -> &'static str {
    match protocol {
        LegacyProtocol::XxlJob34 => "run",
        LegacyProtocol::XxlJob35 => "trigger",
    }
}

/// `address` (as registered: `http://host:9999/`, with or without its
/// slash) joined with an executor path.
pub fn executor_url(address: &str, path: &str) -> String {
    format!("{}/{path}", address.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_of_both_lines_and_of_xxl_job_2_are_read() {
        let old: Callback = serde_json::from_str(
            r#"[{"logId":7,"logDateTim":1,"handleCode":200,"handleMsg":"ok"}]"#,
        )
        .unwrap();
        let new: Callback = serde_json::from_str(
            r#"{"callbackList":[{"logId":7,"logDateTime":1,"handleCode":502,"handleMsg":"late"}]}"#,
        )
        .unwrap();
        let oldest: Callback = serde_json::from_str(
            r#"[{"logId":7,"logDateTim":1,"executeResult":{"code":500,"msg":"boom"}}]"#,
        )
        .unwrap();
        let [old] = <[_; 1]>::try_from(old.items()).unwrap();
        let [new] = <[_; 1]>::try_from(new.items()).unwrap();
        let [oldest] = <[_; 1]>::try_from(oldest.items()).unwrap();
        assert_eq!(
            (old.log_id, old.code(), old.message()),
            (7, 200, "ok".into())
        );
        assert_eq!((new.code(), new.log_date_time), (502, Some(1)));
        assert_eq!((oldest.code(), oldest.message()), (500, "boom".into()));
    }

    #[test]
    fn answers_carry_their_payload_in_data_or_content() {
        let old: Envelope = serde_json::from_str(r#"{"code":200,"content":{"a":1}}"#).unwrap();
        let new: Envelope = serde_json::from_str(r#"{"code":200,"data":{"a":2}}"#).unwrap();
        assert_eq!(old.payload().unwrap()["a"], 1);
        assert_eq!(new.payload().unwrap()["a"], 2);
        assert_eq!(
            executor_url("http://127.0.0.1:9999/", "run"),
            "http://127.0.0.1:9999/run"
        );
    }
}
