//! The audit log as the API keeps and answers it. [`record`] wraps every
//! route that a user or program calls with a token or session, and the
//! login: each request that changes something (any method but GET and
//! HEAD) is appended after its answer with who sent it (user or token,
//! tenant, role), from where (address, user agent), the route and path,
//! and the answer's status. A handler may say more through an
//! [`AuditNote`] in its answer (a job's changed fields, a trigger's param,
//! a login's user name). Bodies are never read here, so no secret value,
//! password or token reaches the log; `GET /api/v1/audit` pages it, an
//! operator every tenant's, a tenant admin its own.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, MatchedPath};
use cronbox_api::{AuditEntry, AuditPage};

use super::*;
use crate::store::{AuditFilter, audit_outcome};

/// What a handler adds to its answer's audit entry.
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditNote {
    /// The tenant and actor, when the caller was not known before the
    /// handler ran (a login).
    pub(crate) tenant: Option<String>,
    pub(crate) actor: Option<String>,
    pub(crate) detail: Option<Value>,
}

impl AuditNote {
    /// A note of `detail`, each of its values cut to [`DETAIL_VALUE_BYTES`].
    pub(crate) fn detail(detail: Value) -> Extension<AuditNote> {
        Extension(AuditNote {
            detail: Some(bounded(detail)),
            ..AuditNote::default()
        })
    }
}

/// The longest value a detail keeps (serialized); longer ones are cut.
const DETAIL_VALUE_BYTES: usize = 4096;
/// The routes of one tenant (`/api/v1/tenants/{name}/…`): their entries
/// are that tenant's.
const TENANT_ROUTES: &str = "/api/v1/tenants/{name}/";

/// The longest user agent and path kept.
const TEXT_BYTES: usize = 512;

fn cut(text: &str, bytes: usize) -> String {
    if text.len() <= bytes {
        return text.to_owned();
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `detail` with each long value cut to text of [`DETAIL_VALUE_BYTES`].
fn bounded(detail: Value) -> Value {
    match detail {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| (key, bounded(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(bounded).collect()),
        Value::String(text) => Value::String(cut(&text, DETAIL_VALUE_BYTES)),
        other => {
            let text = other.to_string();
            if text.len() > DETAIL_VALUE_BYTES {
                Value::String(cut(&text, DETAIL_VALUE_BYTES))
            } else {
                other
            }
        }
    }
}

/// The fields of a job that a change changed, each `{from, to}` (its
/// revision and times left out).
pub(crate) fn changed_fields(before: &JobRow, after: &JobRow) -> Value {
    const MOVING: [&str; 4] = ["revision", "updated_at_ms", "created_at_ms", "next_fire_ms"];
    let (Ok(Value::Object(before)), Ok(Value::Object(after))) =
        (serde_json::to_value(before), serde_json::to_value(after))
    else {
        return Value::Null;
    };
    let changed: serde_json::Map<String, Value> = after
        .iter()
        .filter(|(key, value)| !MOVING.contains(&key.as_str()) && before.get(*key) != Some(*value))
        .map(|(key, value)| {
            let from = before.get(key).cloned().unwrap_or(Value::Null);
            (key.clone(), json!({ "from": from, "to": value }))
        })
        .collect();
    json!({ "changed": changed })
}

/// Appends a changing request to the audit log once it is answered.
pub(crate) async fn record(
    State(state): State<Arc<AdminState>>,
    request: Request,
    next: Next,
) -> Response {
    if reads(&request) {
        return next.run(request).await;
    }
    let path = request.uri().path().to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(path.as_str(), MatchedPath::as_str);
    let action = format!("{} {route}", request.method());
    let route = route.to_owned();
    let caller = request.extensions().get::<Caller>().cloned();
    let address = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(address)| address.ip().to_string());
    let user_agent = request
        .headers()
        .get(header::USER_AGENT)
        .and_then(|value| value.to_str().ok())
        .map(|agent| cut(agent, TEXT_BYTES));
    let response = next.run(request).await;
    let note = response
        .extensions()
        .get::<AuditNote>()
        .cloned()
        .unwrap_or_default();
    let actor = match (&note.actor, &caller) {
        (Some(actor), _) => actor.clone(),
        (None, Some(caller)) => match (&caller.user, caller.token_id) {
            (Some(user), _) => user.clone(),
            (None, Some(id)) => format!("token {id}"),
            (None, None) => "operator token".to_owned(),
        },
        (None, None) => "anonymous".to_owned(),
    };
    // A change the operator makes to a tenant (its tokens, quotas,
    // ceiling) is that tenant's, so that its admins see it too. Anyone
    // else's request is filed in the caller's own tenant, whatever tenant
    // its path names: a refused request never writes into another's log.
    let by_operator = caller
        .as_ref()
        .is_some_and(|caller| caller.role == cronbox_api::Role::Operator);
    let tenant_named = (by_operator && route.starts_with(TENANT_ROUTES))
        .then(|| path.split('/').nth(4).map(str::to_owned))
        .flatten();
    let entry = AuditEntry {
        id: 0,
        at_ms: state.services.now_ms(),
        tenant: note
            .tenant
            .or(tenant_named)
            .or_else(|| caller.as_ref().map(|caller| caller.tenant.clone()))
            .unwrap_or_default(),
        actor,
        role: caller.as_ref().map(|caller| caller.role),
        token_id: caller.as_ref().and_then(|caller| caller.token_id),
        action,
        target: cut(&path, TEXT_BYTES),
        status: response.status().as_u16(),
        outcome: audit_outcome(response.status().as_u16()).to_owned(),
        address,
        user_agent,
        detail: note.detail,
    };
    if let Err(error) = service::audit::record(state.services.store(), &entry).await {
        tracing::error!(%error, action = %entry.action, target = %entry.target,
            "a change was not written to the audit log");
    }
    response
}

/// Most entries in one page of `GET /api/v1/audit`.
const MAX_AUDIT_PAGE: i64 = 1000;

/// The filters and page of `GET /api/v1/audit`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    /// Only this tenant's entries (the operator; a tenant admin sees its own)
    tenant: Option<String>,
    /// Only this actor's
    actor: Option<String>,
    /// Only actions containing this text (`jobs`, `DELETE`)
    action: Option<String>,
    /// Made at or after
    #[param(inline)]
    from_ms: Option<Integer>,
    /// Made at or before
    #[param(inline)]
    to_ms: Option<Integer>,
    /// Entries older than this id (the previous page's next_before)
    #[param(inline)]
    before: Option<Integer>,
    /// Entries (default 100, at most 1000)
    #[param(inline)]
    limit: Option<Bounded<1, { MAX_AUDIT_PAGE }>>,
}

/// The audit log, newest first, filtered by `tenant` (the operator's
/// choice; a tenant admin sees its own), `actor`, `action` (text it
/// contains), `from_ms`/`to_ms`, paged with `limit` and `before`.
pub(super) async fn audit_log(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Params(query): Params<AuditQuery>,
) -> Result<impl IntoResponse, Failure> {
    let tenant = match caller.only_tenant() {
        Some(own) => Some(own),
        None => query.tenant,
    };
    let filter = AuditFilter {
        tenant,
        actor: query.actor,
        action: query.action,
        from_ms: query.from_ms.map(Bounded::get),
        to_ms: query.to_ms.map(Bounded::get),
        before_id: query.before.map(Bounded::get),
        limit: query.limit.map_or(100, Bounded::get),
    };
    let entries = service::audit::page(state.services.store(), &filter).await?;
    let next_before = (entries.len() as i64 == filter.limit)
        .then(|| entries.last().map(|entry| entry.id))
        .flatten();
    Ok(Json(AuditPage {
        entries,
        next_before,
    }))
}

pub(super) fn routes(table: &mut Routes) {
    let operation = Operation {
        query: parameters_of::<AuditQuery>(),
        ..op(
            "get",
            "/api/v1/audit",
            "audit",
            "The audit log, newest first: every change made through the API and every login, with who, from where and how it ended (a tenant admin sees its tenant's)",
            None,
            "200",
            schema("AuditPage"),
        )
    };
    table.route(operation, ADMIN, audit_log);
}
