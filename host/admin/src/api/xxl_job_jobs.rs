//! xxl-job 3.5's job API: `addJob`, `updateJob`, `removeJob`, `startJob`,
//! `stopJob` and `triggerJob` under `/api/` and `/xxl-job-admin/api/`, so
//! that a 3.5 user's deployment scripts run unchanged against the jobs of a
//! legacy group. Each call carries the group's `XXL-JOB-APPNAME` and
//! `XXL-JOB-ACCESS-TOKEN` and acts on that group's jobs only (xxl-job
//! lets any group's token manage every group); a job is named by its
//! xxl-job id (recorded by the import, given by `addJob`) or, failing
//! that, by its cronbox id. The jobs are those of the one tenant the
//! group is granted to (the operator's when it is granted to none).
//! Answers are xxl-job's envelope, HTTP 200 even for a refusal; each call
//! is written to the audit log with the group's token as its actor and
//! xxl-job's code in its detail.

use axum::http::HeaderMap;
use axum::routing::post;
use cronbox_api::{XxlJobFields, XxlJobPlace};
use cronbox_protocol::TriggerKind;

use super::audit::AuditNote;
use super::*;
use crate::legacy::wire::{APPNAME_HEADER, Envelope, TOKEN_HEADER};

/// What a call asks for: the part of the path after `api/`.
#[derive(Debug, Clone, Copy)]
enum Operation {
    Add,
    Update,
    Remove,
    Start,
    Stop,
    Trigger,
}

const OPERATIONS: [(&str, Operation); 6] = [
    ("addJob", Operation::Add),
    ("updateJob", Operation::Update),
    ("removeJob", Operation::Remove),
    ("startJob", Operation::Start),
    ("stopJob", Operation::Stop),
    ("triggerJob", Operation::Trigger),
];

/// The routes, under both base paths xxl-job's clients use.
pub(super) fn routes() -> Router<Arc<AdminState>> {
    let mut router = Router::new();
    for base in ["/xxl-job-admin/api", "/api"] {
        for (uri, operation) in OPERATIONS {
            router =
                router.route(
                    &format!("{base}/{uri}"),
                    post(
                        move |State(state): State<Arc<AdminState>>,
                              headers: HeaderMap,
                              body: Bytes| async move {
                            answer(&state, operation, &headers, &body).await
                        },
                    ),
                );
        }
    }
    router
}

/// The body of every call, as xxl-job's `JobAddRequest`,
/// `JobUpdateRequest`, `JobOperateRequest` and `JobTriggerRequest` write it
/// (Gson: absent fields are null, unknown ones ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobRequest {
    id: Option<i64>,
    job_group: Option<i64>,
    name: Option<String>,
    alarm_email: Option<String>,
    schedule_type: Option<String>,
    schedule_conf: Option<String>,
    misfire_strategy: Option<String>,
    executor_route_strategy: Option<String>,
    executor_handler: Option<String>,
    executor_param: Option<String>,
    executor_block_strategy: Option<String>,
    executor_timeout: Option<i64>,
    executor_fail_retry_count: Option<i64>,
    glue_type: Option<String>,
    address_list: Option<String>,
}

impl JobRequest {
    fn fields(&self) -> XxlJobFields<'_> {
        XxlJobFields {
            glue_type: self.glue_type.as_deref(),
            executor_handler: self.executor_handler.as_deref(),
            schedule_type: self.schedule_type.as_deref(),
            schedule_conf: self.schedule_conf.as_deref(),
            misfire_strategy: self.misfire_strategy.as_deref(),
            executor_route_strategy: self.executor_route_strategy.as_deref(),
            executor_block_strategy: self.executor_block_strategy.as_deref(),
            executor_timeout: self.executor_timeout,
            executor_fail_retry_count: self.executor_fail_retry_count,
            executor_param: self.executor_param.as_deref(),
            alarm_email: self.alarm_email.as_deref(),
        }
    }
}

/// Who calls: a legacy group's token, acting for one tenant.
struct TokenCaller {
    group: String,
    tenant: String,
}

/// What a call did, for its answer and its audit entry.
struct Done {
    data: Option<String>,
    notes: Vec<String>,
    job: Option<JobId>,
}

impl Done {
    fn on(job: JobId) -> Done {
        Done {
            data: None,
            notes: Vec::new(),
            job: Some(job),
        }
    }
}

async fn answer(
    state: &AdminState,
    operation: Operation,
    headers: &HeaderMap,
    body: &[u8],
) -> (Extension<AuditNote>, Json<Envelope>) {
    let caller = match token_caller(state, headers, body).await {
        Ok(caller) => caller,
        Err(refusal) => return (note(None, None, &refusal), Json(refusal)),
    };
    let outcome = match serde_json::from_slice::<JobRequest>(body) {
        Ok(request) => operate(state, &caller, operation, &request).await,
        Err(error) => Err(format!("invalid request body: {error}")),
    };
    let (envelope, job) = match outcome {
        Ok(done) => {
            let mut envelope = Envelope::ok();
            envelope.msg = (!done.notes.is_empty()).then(|| done.notes.join("; "));
            envelope.data = done.data.map(Value::String);
            (envelope, done.job)
        }
        Err(message) => (Envelope::refused(message), None),
    };
    (note(Some(&caller), job, &envelope), Json(envelope))
}

/// The audit entry's note: the group's token as the actor, in the tenant
/// it acts for, with xxl-job's code and message.
fn note(
    caller: Option<&TokenCaller>,
    job: Option<JobId>,
    envelope: &Envelope,
) -> Extension<AuditNote> {
    let Extension(mut note) =
        AuditNote::detail(json!({ "code": envelope.code, "msg": envelope.msg, "job": job }));
    if let Some(caller) = caller {
        note.actor = Some(format!("xxl-job token of group {}", caller.group));
        note.tenant = Some(caller.tenant.clone());
    }
    Extension(note)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    super::xxl_job::header(headers, name)
        .unwrap_or_default()
        .trim()
}

/// The caller, from xxl-job 3.5's two headers (both required, as 3.5
/// requires them), or xxl-job's refusal.
async fn token_caller(
    state: &AdminState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<TokenCaller, Envelope> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Envelope::refused("invalid request, requestBody empty."));
    }
    let (appname, token) = (
        header(headers, APPNAME_HEADER),
        header(headers, TOKEN_HEADER),
    );
    if appname.is_empty() || token.is_empty() {
        return Err(Envelope::refused(
            "invalid request, accessToken or appname is empty.",
        ));
    }
    super::xxl_job::check_group_token(state, appname, token, "a call to xxl-job's job API").await?;
    let tenant = service::xxl_jobs::tenant_of_group(state.services.store(), appname)
        .await
        .map_err(|error| Envelope::refused(error.to_string()))?;
    Ok(TokenCaller {
        group: appname.to_owned(),
        tenant,
    })
}

async fn operate(
    state: &AdminState,
    caller: &TokenCaller,
    operation: Operation,
    request: &JobRequest,
) -> Result<Done, String> {
    let services = &state.services;
    if let Operation::Add = operation {
        return add(state, caller, request).await;
    }
    let job = job_named(state, caller, request.id).await?;
    if !job.secrets.is_empty() {
        return Err(format!(
            "job {} reads secrets: an admin changes it, through cronbox's API",
            job.id
        ));
    }
    let id = job.id;
    match operation {
        Operation::Add => unreachable!("added above"),
        Operation::Update => {
            let mut spec = JobSpec::from(job.clone());
            let (mapped, notes) = request.fields().legacy_job(XxlJobPlace {
                name: request.name.as_deref().unwrap_or_default(),
                group: &caller.group,
                time_zone: &job.time_zone,
                alarm_webhook: (!job.alarm_url.is_empty()).then_some(job.alarm_url.as_str()),
            })?;
            spec.name = mapped.name;
            spec.executor_handler = mapped.executor_handler;
            spec.schedule_type = mapped.schedule_type;
            spec.schedule_conf = mapped.schedule_conf;
            spec.misfire = mapped.misfire;
            spec.route = mapped.route;
            spec.block_strategy = mapped.block_strategy;
            spec.timeout_ms = mapped.timeout_ms;
            spec.retry_count = mapped.retry_count;
            spec.param = mapped.param;
            service::jobs::update(services, &job, &spec)
                .await
                .map_err(refusal)?;
            Ok(Done {
                notes,
                ..Done::on(id)
            })
        }
        Operation::Remove => {
            service::jobs::delete(services.store(), &job)
                .await
                .map_err(refusal)?;
            Ok(Done::on(id))
        }
        Operation::Start => {
            service::job_lifecycle::start(services, &job)
                .await
                .map_err(refusal)?;
            Ok(Done::on(id))
        }
        Operation::Stop => {
            service::job_lifecycle::stop(services, id)
                .await
                .map_err(refusal)?;
            Ok(Done::on(id))
        }
        Operation::Trigger => {
            let addresses: Vec<String> = request
                .address_list
                .as_deref()
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|address| !address.is_empty())
                .map(str::to_owned)
                .collect();
            let addresses = (!addresses.is_empty()).then_some(addresses);
            let run = service::triggers::trigger(
                services,
                job,
                TriggerKind::Api,
                request.executor_param.clone(),
                addresses,
            )
            .await
            .map_err(refusal)?;
            Ok(Done {
                notes: vec![format!("run {run}")],
                ..Done::on(id)
            })
        }
    }
}

/// `addJob`: a stopped job of the caller's group (xxl-job adds jobs
/// stopped), in UTC, with the next xxl-job id of the group, which `data`
/// answers.
async fn add(
    state: &AdminState,
    caller: &TokenCaller,
    request: &JobRequest,
) -> Result<Done, String> {
    if request.job_group.is_none() {
        return Err("jobGroup is required (the group of this access token)".to_owned());
    }
    let (spec, mut notes) = request.fields().legacy_job(XxlJobPlace {
        name: request.name.as_deref().unwrap_or_default(),
        group: &caller.group,
        time_zone: "UTC",
        alarm_webhook: None,
    })?;
    let (job, xxl_job_id) = service::xxl_jobs::add(&state.services, &caller.tenant, spec)
        .await
        .map_err(refusal)?;
    notes.push(format!("cronbox job {}", job.id));
    Ok(Done {
        data: Some(xxl_job_id.to_string()),
        notes,
        job: Some(job.id),
    })
}

/// The job `id` names in the caller's group and tenant: the one with that
/// xxl-job id, else the one with that cronbox id and no xxl-job id.
async fn job_named(
    state: &AdminState,
    caller: &TokenCaller,
    id: Option<i64>,
) -> Result<JobRow, String> {
    let id = id.filter(|id| *id > 0).ok_or("id is required")?;
    service::xxl_jobs::job_named(state.services.store(), &caller.group, &caller.tenant, id)
        .await
        .map_err(|error| match error {
            ServiceError::UnknownJob(_) => {
                format!("job {id} is not a job of group {}", caller.group)
            }
            other => other.to_string(),
        })
}

/// A service's refusal as xxl-job's message, naming the field at fault.
fn refusal(error: ServiceError) -> String {
    match error {
        ServiceError::InvalidJob { field, message }
        | ServiceError::InvalidTrigger { field, message } => format!("{field}: {message}"),
        other => other.to_string(),
    }
}
