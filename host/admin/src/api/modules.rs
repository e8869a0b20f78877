//! Module uploads (checked before anything is stored), named versions,
//! labels and rollback.

use super::*;
use bodies::VersionChoice;

/// Where an upload goes: the module name to add a version to (none: the
/// content is stored by digest only), and labels for the new version.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct UploadQuery {
    /// Module name: the upload becomes its next version
    name: Option<String>,
    /// Comma-separated labels for the new version
    labels: Option<String>,
    /// Why this version (at most 500 bytes, no control characters); a
    /// push of the latest version's content with a note is a new version
    note: Option<String>,
}

/// How many of the largest uploads the admin reads at once.
pub(crate) const UPLOADS_AT_ONCE: u32 = 4;

/// Room for the module uploads the admin reads at once: each holds the
/// bytes it may be (its `Content-Length`, else the largest upload) until
/// it is answered, so concurrent uploads cannot take the admin's memory
/// past [`UPLOADS_AT_ONCE`] of the largest; one that finds no room is
/// answered 503 `uploads_busy` at once (with `Retry-After`), before its
/// body is read.
#[derive(Debug)]
pub(crate) struct UploadRoom {
    kib: tokio::sync::Semaphore,
    largest_kib: u32,
}

impl UploadRoom {
    /// Room for modules of at most `max_bytes` (with their multipart
    /// envelope).
    pub(crate) fn for_modules_of(max_bytes: usize) -> UploadRoom {
        let largest_kib =
            u32::try_from((max_bytes + (64 << 10)).div_ceil(1024)).unwrap_or(u32::MAX);
        let total = largest_kib.saturating_mul(UPLOADS_AT_ONCE);
        UploadRoom {
            kib: tokio::sync::Semaphore::new(total as usize),
            largest_kib,
        }
    }

    /// Room for an upload of `content_length` bytes (unknown: the
    /// largest), held until the permit is dropped.
    pub(crate) fn take(
        &self,
        content_length: Option<u64>,
    ) -> Result<tokio::sync::SemaphorePermit<'_>, Failure> {
        let kib = content_length
            .map_or(self.largest_kib, |bytes| {
                u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
            })
            .clamp(1, self.largest_kib);
        self.kib.try_acquire_many(kib).map_err(|_| {
            Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::UploadsBusy,
                format!(
                    "the admin is reading {UPLOADS_AT_ONCE} uploads' worth of modules at once; \
                     try again in a moment"
                ),
            )
            .retry_after(1)
        })
    }
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
    caller: Caller,
    Params(mut query): Params<UploadQuery>,
    request: Request,
) -> Result<impl IntoResponse, Failure> {
    let limit = state.max_module_bytes;
    let content_length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse().ok());
    let _room = state.uploads.take(content_length)?;
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("multipart/form-data"));
    let bytes: Bytes = if multipart {
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
                "note" => query.note = Some(read_text(field.text().await)?),
                other => {
                    return Err(bad(format!(
                        "unknown form field {other:?}: use module, name, labels, note"
                    )));
                }
            }
        }
        module.ok_or_else(|| bad("the form has no `module` file field".to_owned()))?
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
    };
    if let Some(name) = &query.name {
        require_push_right(&state, &caller, name, "name").await?;
    }
    let answer = service::modules::upload(
        &state.services,
        &caller.tenant,
        &bytes,
        &service::modules::Upload {
            name: query.name,
            labels: query.labels,
            note: query.note.unwrap_or_default(),
            pushed_by: caller.who(),
        },
        limit,
        state.keep_versions,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(answer)))
}

/// A new current version of module `name` runs in the jobs that follow
/// it: when one of them reads secrets, making it needs the role that
/// manages secrets (see [`require_secret_manager`]).
async fn require_push_right(
    state: &AdminState,
    caller: &Caller,
    name: &str,
    field: &str,
) -> Result<(), Failure> {
    if caller.role.includes(Role::Admin) {
        return Ok(());
    }
    let readers =
        service::modules::secret_readers_following(state.services.store(), &caller.tenant, name)
            .await?;
    match readers.first() {
        None => Ok(()),
        Some(job) => require_secret_manager(
            caller,
            field,
            &format!(
                "a new version of module {name:?}, which job {job} follows and which reads \
                 secrets,"
            ),
        ),
    }
}

pub(super) async fn list_modules(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
) -> Result<impl IntoResponse, Failure> {
    let tenant = caller.only_tenant();
    Ok(Json(
        service::modules::latest(state.services.store(), tenant.as_deref()).await?,
    ))
}

pub(super) async fn list_module_versions(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.services.store();
    Ok(Json(
        service::modules::versions(store, &caller.tenant, &name).await?,
    ))
}

/// Makes an earlier version current again (see
/// [`service::modules::rollback`]).
pub(super) async fn rollback_module(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(choice): ApiJson<VersionChoice>,
) -> Result<impl IntoResponse, Failure> {
    require_push_right(&state, &caller, &name, "name").await?;
    let rolled_back = service::modules::rollback(
        &state.services,
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
    caller: Caller,
    Path((name, label)): Path<(String, String)>,
    ApiJson(choice): ApiJson<VersionChoice>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.services.store();
    let versions =
        service::modules::label(store, &caller.tenant, &name, &label, choice.version).await?;
    Ok(Json(versions))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes, max_module_bytes: usize) {
    let operation = Operation {
        query: parameters_of::<UploadQuery>(),
        body_content: Some(json!({
            "application/octet-stream": { "schema": { "type": "string", "format": "binary" } },
            "multipart/form-data": { "schema": {
                "type": "object",
                "required": ["module"],
                "additionalProperties": false,
                "properties": {
                    "module": { "type": "string", "format": "binary" },
                    "name": { "type": "string" },
                    "labels": { "type": "string" },
                    "note": { "type": "string" }
                }
            } }
        })),
        ..op(
            "post",
            "/api/v1/modules",
            "modules",
            "Upload a component (raw body or multipart field `module`), checked before it is stored",
            None,
            "201",
            schema("Uploaded"),
        )
    };
    // Room for a multipart envelope around the largest module.
    table.route(
        operation,
        DEVELOPER,
        upload_module.layer(DefaultBodyLimit::max(max_module_bytes + (64 << 10))),
    );
    let operation = op(
        "get",
        "/api/v1/modules",
        "modules",
        "The latest version of each named module",
        None,
        "200",
        array_of(schema("TenantModule")),
    );
    table.route(operation, VIEWER, list_modules);
    let operation = op(
        "get",
        "/api/v1/modules/{name}/versions",
        "modules",
        "A module's versions, newest first",
        None,
        "200",
        array_of(schema("ModuleVersion")),
    );
    table.route(operation, VIEWER, list_module_versions);
    let operation = op(
        "post",
        "/api/v1/modules/{name}/rollback",
        "modules",
        "Make an earlier version current again (as a new version)",
        Some(schema("VersionChoice")),
        "201",
        schema("RolledBack"),
    );
    table.route(operation, DEVELOPER, rollback_module);
    let operation = op(
        "put",
        "/api/v1/modules/{name}/labels/{label}",
        "modules",
        "Put a label on one version",
        Some(schema("VersionChoice")),
        "200",
        array_of(schema("ModuleVersion")),
    );
    table.route(operation, DEVELOPER, label_module);
}
