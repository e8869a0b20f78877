//! Module uploads (checked before anything is stored), named versions,
//! labels and rollback.

use super::*;
use bodies::VersionChoice;

/// Where an upload goes: the module name to add a version to (none: the
/// content is stored by digest only), and labels for the new version.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UploadQuery {
    name: Option<String>,
    /// Comma-separated.
    labels: Option<String>,
}

pub(super) fn too_large(limit: usize) -> Failure {
    Failure::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::ModuleTooLarge,
        format!("the upload is over the limit of {limit} bytes"),
    )
}

/// Uploads a component, as the raw body or as `multipart/form-data` with a
/// `module` file field (and optional `name` and `labels` fields). It is
/// checked like the runtime checks it (a component for world `job`, no
/// import beyond those granted, the size limit) before anything is stored;
/// content is kept by sha256. With a name, it becomes that module's next
/// version, and the jobs that follow the module move to it.
pub(super) async fn upload_module(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<UploadQuery>, axum::extract::rejection::QueryRejection>,
    request: Request,
) -> Result<impl IntoResponse, Failure> {
    let Query(mut query) = query.map_err(|rejection| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidQuery,
            rejection.body_text(),
        )
    })?;
    let limit = state.max_module_bytes;
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("multipart/form-data"));
    let bytes: Vec<u8> = if multipart {
        let bad = |message: String| {
            Failure::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidUpload, message)
        };
        let mut form = axum::extract::Multipart::from_request(request, &())
            .await
            .map_err(|rejection| bad(rejection.body_text()))?;
        let mut module = None;
        while let Some(field) = form.next_field().await.map_err(|error| {
            if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large(limit)
            } else {
                bad(error.body_text())
            }
        })? {
            let name = field.name().unwrap_or_default().to_owned();
            let read_text = |text: Result<String, axum::extract::multipart::MultipartError>| {
                text.map_err(|error| bad(error.body_text()))
            };
            match name.as_str() {
                "module" => {
                    module = Some(field.bytes().await.map_err(|error| {
                        if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
                            too_large(limit)
                        } else {
                            bad(error.body_text())
                        }
                    })?)
                }
                "name" => query.name = Some(read_text(field.text().await)?),
                "labels" => query.labels = Some(read_text(field.text().await)?),
                other => {
                    return Err(bad(format!(
                        "unknown form field {other:?}: use module, name, labels"
                    )));
                }
            }
        }
        module
            .ok_or_else(|| bad("the form has no `module` file field".to_owned()))?
            .to_vec()
    } else {
        Bytes::from_request(request, &())
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    too_large(limit)
                } else {
                    Failure::new(
                        StatusCode::BAD_REQUEST,
                        ErrorCode::InvalidUpload,
                        rejection.body_text(),
                    )
                }
            })?
            .to_vec()
    };
    let answer = service::modules::upload(
        &state.scheduler,
        &caller.tenant,
        &bytes,
        &service::modules::Upload {
            name: query.name,
            labels: query.labels,
            pushed_by: caller.who(),
        },
        limit,
        state.keep_versions,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(answer)))
}

pub(super) async fn list_modules(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
) -> Result<impl IntoResponse, Failure> {
    let modules: Vec<bodies::TenantModule> = state
        .scheduler
        .store()
        .latest_modules(caller.only_tenant().as_deref())
        .await?
        .into_iter()
        .map(|(tenant, latest)| bodies::TenantModule { tenant, latest })
        .collect();
    Ok(Json(modules))
}

pub(super) async fn list_module_versions(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    Ok(Json(
        service::modules::versions(store, &caller.tenant, &name).await?,
    ))
}

/// Makes an earlier version current again (see
/// [`service::modules::rollback`]).
pub(super) async fn rollback_module(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    ApiJson(choice): ApiJson<VersionChoice>,
) -> Result<impl IntoResponse, Failure> {
    let rolled_back = service::modules::rollback(
        &state.scheduler,
        &caller.tenant,
        &name,
        choice.version,
        state.keep_versions,
        &caller.who(),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(rolled_back)))
}

/// Puts a label on one version (taking it off any other).
pub(super) async fn label_module(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path((name, label)): Path<(String, String)>,
    ApiJson(choice): ApiJson<VersionChoice>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    let versions =
        service::modules::label(store, &caller.tenant, &name, &label, choice.version).await?;
    Ok(Json(versions))
}
