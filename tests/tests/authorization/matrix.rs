//! The role matrix: every route of the OpenAPI document called by every kind of caller.

use super::*;

/// A caller of the role matrix: how it authenticates, and the role it acts
/// with (`None`: no user role at all).
struct MatrixCaller {
    name: &'static str,
    auth: MatrixAuth,
    role: Option<&'static str>,
}

enum MatrixAuth {
    None,
    Bearer(String),
    Session(Session),
}

const RANKS: [&str; 4] = ["viewer", "developer", "admin", "operator"];

fn rank(role: &str) -> usize {
    RANKS.iter().position(|known| *known == role).unwrap()
}

/// Every route of the OpenAPI document (and so of the router's table)
/// called by every kind of caller: no token, the executor token, the
/// operator token, a tenant's token, and a session and a user token of
/// each role. A route open to all answers anyone; an executor route
/// answers the executor token only (401 for the rest); a user route
/// answers 401 with no or the wrong kind of credentials, 403 from the
/// router to a role below its `x-required-role`, and reaches its handler
/// (never that 403) at or above it. No answer is a server error, and a
/// route naming an id the operator has no object of answers 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_every_role_as_its_table_says() {
    let admin = admin().await;
    let acme = admin.tenant("acme").await;
    admin.add_user("root", "default", "operator").await;
    for role in ["viewer", "developer", "admin"] {
        admin.add_user(&format!("acme-{role}"), "acme", role).await;
    }
    let mut callers = vec![
        MatrixCaller {
            name: "no token",
            auth: MatrixAuth::None,
            role: None,
        },
        MatrixCaller {
            name: "executor token",
            auth: MatrixAuth::Bearer(EXEC.into()),
            role: None,
        },
        MatrixCaller {
            name: "operator token",
            auth: MatrixAuth::Bearer(API.into()),
            role: Some("operator"),
        },
        MatrixCaller {
            name: "tenant token",
            auth: MatrixAuth::Bearer(acme.token.clone()),
            role: Some("admin"),
        },
    ];
    for (user, role) in [
        ("acme-viewer", "viewer"),
        ("acme-developer", "developer"),
        ("acme-admin", "admin"),
        ("root", "operator"),
    ] {
        let (token, _) = admin.token_of(user, role).await;
        callers.push(MatrixCaller {
            name: role,
            auth: MatrixAuth::Bearer(token.token),
            role: Some(role),
        });
        callers.push(MatrixCaller {
            name: role,
            auth: MatrixAuth::Session(admin.login(user).await),
            role: Some(role),
        });
    }

    let (status, document) = admin.operator.get("/api/v1/openapi.json").await;
    assert_eq!(status, 200);
    let mut routes: Vec<(String, String, String, Value)> = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let required = operation["x-required-role"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} states no x-required-role"))
                .to_owned();
            let schema = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .and_then(|reference| reference.rsplit('/').next());
            routes.push((method.clone(), path.clone(), required, valid_body(schema)));
        }
    }
    // Ending a session last: it would log the session callers out.
    routes.sort_by_key(|(method, path, _, _)| method == "delete" && path == "/api/v1/session");
    assert!(routes.len() > 60, "{} routes", routes.len());

    let mut wrong = Vec::new();
    for (method, path, required, body) in &routes {
        let concrete = path
            .replace("{id}", "999999999")
            .replace("{digest}", &"0".repeat(64))
            .replace("{label}", "stable")
            .replace("{name}", "matrix-absent")
            .replace("{node}", "matrix-absent");
        let method: Method = method.to_uppercase().parse().unwrap();
        for caller in &callers {
            let mut request = admin
                .http
                .request(method.clone(), format!("{}{concrete}", admin.base));
            match &caller.auth {
                MatrixAuth::None => {}
                MatrixAuth::Bearer(token) => request = request.bearer_auth(token),
                MatrixAuth::Session(session) => {
                    request = request
                        .header("cookie", &session.cookie)
                        .header("x-csrf-token", &session.csrf);
                }
            }
            if method != Method::GET && method != Method::DELETE {
                request = request.json(body);
            }
            let (status, body) = answer(request).await;
            let refused_by_router = status == 403
                && body["message"]
                    .as_str()
                    .is_some_and(|message| message.starts_with(&format!("{method} ")));
            let expected_ok = match required.as_str() {
                "none" => status != 401 && status != 403,
                "executor" => match caller.name {
                    "executor token" => status != 401 && status != 403,
                    _ => status == 401,
                },
                "any" => match caller.role {
                    Some(_) => status != 401 && !refused_by_router,
                    None => status == 401,
                },
                role => match caller.role {
                    None => status == 401,
                    Some(has) if rank(has) >= rank(role) => status != 401 && !refused_by_router,
                    Some(_) => refused_by_router,
                },
            };
            // Nothing is a server error, and an unknown id is 404
            // everywhere (each change sent a body of the right shape).
            let unknown_id_ok =
                caller.name != "operator token" || !path.contains("{id}") || status == 404;
            if !expected_ok || status >= 500 || !unknown_id_ok {
                wrong.push(format!(
                    "{method} {path} (needs {required}) as {} ({}): {status} {body}",
                    caller.name,
                    match caller.auth {
                        MatrixAuth::Session(_) => "session",
                        _ => "bearer",
                    }
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A body of the shape `schema` names, for a route naming an object that
/// does not exist: what a client would send if the object did. A route
/// whose body this does not know fails the matrix until it is added here.
fn valid_body(schema: Option<&str>) -> Value {
    match schema {
        None => json!({}),
        Some("JobSpec") => {
            json!({ "name": "matrix", "module": "matrix-absent", "schedule_type": "NONE" })
        }
        Some("StateEdit") => json!({ "state": {} }),
        Some("PauseRequest" | "TriggerRequest") => json!({}),
        Some("BackfillRequest") => json!({ "from_ms": 0, "to_ms": 1 }),
        Some("ExecutorTokenRotation") => json!({ "overlap_ms": 0 }),
        Some(other) => json!({ "unknown_body_for_the_matrix": other }),
    }
}
