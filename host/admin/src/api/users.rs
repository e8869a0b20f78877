//! Sessions (login, who am I, logout), users, and the API tokens users
//! make for themselves.
//!
//! A login answers a session cookie (HttpOnly, SameSite=Strict, Secure when
//! the admin serves TLS itself or a proxy says the request came over it) and the session's
//! CSRF token; failed logins are throttled per user name and per client
//! address. Tenant admins manage their tenant's users (up to their own
//! role); the operator manages everyone's.

use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use axum::http::HeaderMap;
use cronbox_api::{
    LoggedOut, Login, PasswordChange, Session, TokenInfo, User, UserChanged, UserSpec,
    UserTokenCreated, UserTokenSpec,
};

use super::*;
use crate::service::users::{LoginThrottle, SESSION_MS};
use crate::store::Principal;

/// The `Set-Cookie` value of a session (`None`: the cookie cleared);
/// `Secure` when the admin serves TLS (`over_tls`) or a proxy in front
/// of it says the request came over TLS.
fn session_cookie(value: Option<&str>, headers: &HeaderMap, over_tls: bool) -> String {
    let secure = over_tls
        || headers
            .get("x-forwarded-proto")
            .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"));
    let (value, max_age) = match value {
        Some(value) => (value, SESSION_MS / 1000),
        None => ("", 0),
    };
    format!(
        "{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        if secure { "; Secure" } else { "" }
    )
}

/// The throttle's keys for a login attempt.
fn throttle_keys(user: &str, peer: Option<SocketAddr>) -> Vec<String> {
    let mut keys = vec![format!("user:{user}")];
    if let Some(peer) = peer {
        keys.push(format!("addr:{}", peer.ip()));
    }
    keys
}

fn too_many_attempts(retry_after: u64) -> Response {
    Failure::new(
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::TooManyAttempts,
        format!("too many failed logins; try again in {retry_after} s"),
    )
    .retry_after(retry_after)
    .into_response()
}

/// Logs in (no token): answers the session and sets its cookie.
pub(super) async fn login(
    State(state): State<Arc<AdminState>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    ApiJson(login): ApiJson<Login>,
) -> Result<Response, Failure> {
    let peer = peer.map(|Extension(ConnectInfo(address))| address);
    // The audit log names who tried, in the tenant of the user so named.
    let note = |tenant: Option<String>| {
        Extension(AuditNote {
            tenant,
            actor: Some(login.user.clone()),
            detail: None,
        })
    };
    let throttle: &LoginThrottle = &state.logins;
    let now_ms = state.services.now_ms();
    // Counted before the password is checked: concurrent guesses share
    // one allowance.
    let attempt = match throttle.attempt(throttle_keys(&login.user, peer), now_ms) {
        Ok(attempt) => attempt,
        Err(retry_after) => return Ok((note(None), too_many_attempts(retry_after)).into_response()),
    };
    let store = state.services.store();
    let Some(user) = service::users::authenticate(store, &login.user, &login.password).await?
    else {
        drop(attempt);
        tracing::warn!(user = %login.user, ?peer, "failed login");
        let tenant = service::users::find(store, &login.user)
            .await?
            .map(|known| known.tenant);
        let refused = Failure::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            "wrong user name or password",
        );
        return Ok((note(tenant), refused).into_response());
    };
    let logged_in = note(Some(user.tenant.clone()));
    attempt.succeeded();
    let (cookie, csrf) = service::users::open_session(store, &user.name, now_ms).await?;
    let mut response = Json(Session {
        user: Some(user.name),
        tenant: user.tenant,
        role: user.role,
        csrf_token: Some(csrf),
    })
    .into_response();
    response.extensions_mut().insert(logged_in.0);
    if let Ok(value) = session_cookie(Some(&cookie), &headers, state.serves_tls).parse() {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// Who the caller is (and its session's CSRF token).
pub(super) async fn session(caller: Caller) -> Json<Session> {
    Json(Session {
        user: caller.user,
        tenant: caller.tenant,
        role: caller.role,
        csrf_token: caller.csrf,
    })
}

/// Ends the caller's session on the server and clears its cookie.
pub(super) async fn logout(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    let ended = match cookie(&headers, SESSION_COOKIE) {
        Some(value) => service::users::end_session(state.services.store(), value).await?,
        None => false,
    };
    let mut response = Json(LoggedOut { ended }).into_response();
    if let Ok(value) = session_cookie(None, &headers, state.serves_tls).parse() {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Ok(response)
}

fn unknown_user(name: &str) -> Failure {
    Failure::from(ServiceError::UnknownUser(name.to_owned()))
}

/// The user `name` if the caller may manage it (a tenant admin its own
/// tenant's, the operator anyone's); others are unknown to it.
async fn managed_user(state: &AdminState, caller: &Caller, name: &str) -> Result<User, Failure> {
    let user = service::users::find(state.services.store(), name)
        .await?
        .filter(|user| caller.sees(&user.tenant))
        .ok_or_else(|| unknown_user(name))?;
    if !caller.role.includes(user.role) {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!("user {name:?} is a {}, above this caller's role", user.role),
        ));
    }
    Ok(user)
}

/// Whose users `GET /api/v1/users` lists.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct UsersQuery {
    /// Only this tenant's users (operator)
    tenant: Option<String>,
}

/// The users of the caller's tenant (every user, for the operator; `tenant`
/// narrows it).
pub(super) async fn list_users(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Params(query): Params<UsersQuery>,
) -> Result<Json<Vec<User>>, Failure> {
    caller.require(Role::Admin, "listing users")?;
    let tenant = match (caller.only_tenant(), query.tenant) {
        (Some(own), _) => Some(own),
        (None, asked) => asked,
    };
    Ok(Json(
        service::users::list(state.services.store(), tenant.as_deref()).await?,
    ))
}

/// Creates a user (a tenant admin in its tenant, up to its role; the
/// operator anywhere).
pub(super) async fn create_user(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    ApiJson(spec): ApiJson<UserSpec>,
) -> Result<impl IntoResponse, Failure> {
    caller.require(Role::Admin, "creating a user")?;
    let tenant = spec.tenant.clone().unwrap_or_else(|| caller.tenant.clone());
    if !caller.sees(&tenant) {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!("a user of tenant {tenant:?} needs the operator"),
        )
        .field("tenant"));
    }
    service::tenants::known_or_default(state.services.store(), &tenant)
        .await
        .map_err(|error| Failure::from(error).field("tenant"))?;
    if !caller.role.includes(spec.role) {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!("a {} may not create a {}", caller.role, spec.role),
        )
        .field("role"));
    }
    let user = service::users::create(
        state.services.store(),
        &spec,
        &tenant,
        state.services.now_ms(),
    )
    .await?;
    // The user's tenant's entry, so that its admins see who joined it.
    let note = Extension(AuditNote {
        tenant: Some(tenant),
        ..AuditNote::default()
    });
    Ok((StatusCode::CREATED, note, Json(user)))
}

/// Removes a user, its sessions and its tokens.
pub(super) async fn remove_user(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<UserChanged>, Failure> {
    caller.require(Role::Admin, "removing a user")?;
    managed_user(&state, &caller, &name).await?;
    if caller.user.as_deref() == Some(name.as_str()) {
        return Err(ServiceError::InvalidUser {
            field: "name",
            message: "a user cannot remove itself; another admin can".to_owned(),
        }
        .into());
    }
    let (sessions_ended, tokens_revoked) =
        service::users::remove(state.services.store(), &name).await?;
    Ok(Json(UserChanged {
        name,
        sessions_ended,
        tokens_revoked,
    }))
}

/// Sets a user's password; every session of the user ends. One's own
/// password needs a login session (a token never changes it: a leaked
/// read-only token must not become its user) and the current password,
/// whose wrong guesses are throttled as logins are (under a key of their
/// own). Another user's needs the
/// admin role (of the token, when a token calls) at or above that user's.
pub(super) async fn set_password(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(change): ApiJson<PasswordChange>,
) -> Result<Json<UserChanged>, Failure> {
    if caller.user.as_deref() == Some(name.as_str()) {
        if caller.csrf.is_none() {
            return Err(Failure::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                "changing one's own password needs a login session, not a token: log in (the \
                 console's Admin page)",
            ));
        }
        // Counted apart from logins: a user whose name is being guessed at
        // the login can still change its password from its session.
        let attempt = state
            .logins
            .attempt(vec![format!("change:{name}")], state.services.now_ms())
            .map_err(|retry_after| {
                Failure::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    ErrorCode::TooManyAttempts,
                    format!("too many wrong passwords; try again in {retry_after} s"),
                )
                .retry_after(retry_after)
            })?;
        let current = change.current_password.as_deref().unwrap_or_default();
        if service::users::authenticate(state.services.store(), &name, current)
            .await?
            .is_none()
        {
            drop(attempt);
            return Err(Failure::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                "current_password: wrong or missing; changing one's own password needs the \
                 current one",
            )
            .field("current_password"));
        }
        attempt.succeeded();
    } else {
        caller.require(Role::Admin, "setting another user's password")?;
        let user = managed_user(&state, &caller, &name).await?;
        // A peer's password is not one's to set: whoever sets it logs in
        // as that user. The operator's own token (of no user) sets anyone's.
        let operators_token =
            caller.role == Role::Operator && caller.user.is_none() && caller.token_id.is_none();
        if user.role == caller.role && !operators_token {
            return Err(Failure::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                format!(
                    "user {name:?} is a {} as this caller is: a role above it sets its \
                     password (for an operator, the operator's token)",
                    user.role
                ),
            ));
        }
    }
    let sessions_ended =
        service::users::set_password(state.services.store(), &name, &change.password).await?;
    Ok(Json(UserChanged {
        name,
        sessions_ended,
        tokens_revoked: 0,
    }))
}

/// The caller's tokens; a tenant admin sees every token of its tenant.
pub(super) async fn list_tokens(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
) -> Result<Json<Vec<TokenInfo>>, Failure> {
    let user = if caller.role.includes(Role::Admin) {
        None
    } else {
        Some(caller.require_user("listing tokens")?)
    };
    Ok(Json(
        service::users::tokens(state.services.store(), &caller.tenant, user).await?,
    ))
}

/// Makes a token for the calling user, with its role or a lower one; the
/// token is shown once.
pub(super) async fn create_user_token(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    let user = caller.require_user("making a token")?.to_owned();
    // Only from a login session: a token that made tokens would outlive
    // its own revocation in them.
    if caller.csrf.is_none() {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "making a token needs a login session, not a token: log in (the console's \
             Administration page)",
        ));
    }
    let spec: UserTokenSpec = optional_json(&body)?;
    let role = spec.role.unwrap_or(caller.role);
    if !caller.role.includes(role) {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!("a {} may not make a {role} token", caller.role),
        )
        .field("role"));
    }
    let principal = Principal {
        tenant: caller.tenant.clone(),
        role,
        user: Some(user),
    };
    let (id, token) = service::tenants::add_token(
        state.services.store(),
        &principal,
        &spec.label,
        state.services.now_ms(),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(UserTokenCreated {
            id,
            tenant: principal.tenant,
            role,
            token,
        }),
    ))
}

/// Revokes one of the caller's tokens (a tenant admin: any of its
/// tenant's). Either way only a token whose role, and whose user's role,
/// the caller's role includes: a tenant admin never revokes an operator
/// user's token, nor a viewer token its user's admin token.
pub(super) async fn revoke_user_token(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<bodies::TokenRevoked>, Failure> {
    let store = state.services.store();
    let unknown = || {
        Failure::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownToken,
            format!("no token {id} of this caller"),
        )
    };
    let owner = service::users::token_owner(store, &caller.tenant, id)
        .await?
        .ok_or_else(unknown)?;
    if !caller.role.includes(Role::Admin)
        && owner.user.as_deref() != Some(caller.require_user("revoking a token")?)
    {
        return Err(unknown());
    }
    if let Some(above) = [Some(owner.role), owner.user_role]
        .into_iter()
        .flatten()
        .find(|role| !caller.role.includes(*role))
    {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!(
                "token {id} belongs to a {above}, above this caller's role ({})",
                caller.role
            ),
        ));
    }
    match service::tenants::revoke_token(store, &caller.tenant, id).await {
        Err(ServiceError::UnknownToken { .. }) => return Err(unknown()),
        revoked => revoked?,
    }
    Ok(Json(bodies::TokenRevoked {
        tenant: caller.tenant,
        revoked: id,
    }))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "post",
        "/api/v1/session",
        "users",
        "Log in (no token): answers the session and its CSRF token, and sets the session cookie",
        Some(schema("Login")),
        "200",
        schema("Session"),
    );
    table.route(operation, Access::Open, login);
    let operation = op(
        "get",
        "/api/v1/session",
        "users",
        "Who the caller is: user, tenant, role (and a session's CSRF token)",
        None,
        "200",
        schema("Session"),
    );
    table.route(operation, Access::Caller, session);
    let operation = op(
        "delete",
        "/api/v1/session",
        "users",
        "Log out: ends the session on the server and clears its cookie",
        None,
        "200",
        schema("LoggedOut"),
    );
    table.route(operation, Access::Caller, logout);
    let operation = op(
        "get",
        "/api/v1/tokens",
        "users",
        "The caller's tokens (an admin: every token of its tenant); never their values",
        None,
        "200",
        array_of(schema("TokenInfo")),
    );
    table.route(operation, Access::Caller, list_tokens);
    let operation = op(
        "post",
        "/api/v1/tokens",
        "users",
        "Make a token for the calling user, with its role or a lower one, from a login session (never with a token); shown once",
        Some(schema("UserTokenSpec")),
        "201",
        schema("UserTokenCreated"),
    )
    .body_optional();
    table.route(operation, Access::Caller, create_user_token);
    let operation = op(
        "delete",
        "/api/v1/tokens/{id}",
        "users",
        "Revoke one of the caller's tokens (an admin: any of its tenant's)",
        None,
        "200",
        schema("TokenRevoked"),
    );
    table.route(operation, Access::Caller, revoke_user_token);
    let operation = op(
        "put",
        "/api/v1/users/{name}/password",
        "users",
        "Set a password: one's own from a login session with `current_password` (never with a token), or another user's as its admin; the user's sessions end",
        Some(schema("PasswordChange")),
        "200",
        schema("UserChanged"),
    );
    table.route(operation, Access::Caller, set_password);
    let operation = op(
        "get",
        "/api/v1/users",
        "users",
        "Users of the caller's tenant (admin; every tenant's for the operator)",
        None,
        "200",
        array_of(schema("User")),
    )
    .with_query(parameters_of::<UsersQuery>());
    table.route(operation, ADMIN, list_users);
    let operation = op(
        "post",
        "/api/v1/users",
        "users",
        "Create a user (admin, up to its own role; another tenant's: operator)",
        Some(schema("UserSpec")),
        "201",
        schema("User"),
    );
    table.route(operation, ADMIN, create_user);
    let operation = op(
        "delete",
        "/api/v1/users/{name}",
        "users",
        "Remove a user with its sessions and tokens (admin)",
        None,
        "200",
        schema("UserChanged"),
    );
    table.route(operation, ADMIN, remove_user);
}
