//! How service and store errors become the API's error answer, a
//! [`Failure`] (shared with the executor, in `cronbox-protocol`).

use super::*;

/// A definition's field refused before any job has it (a previewed
/// schedule, a checked webhook): 422 naming the field, as a job's would be.
pub(super) fn invalid_definition(invalid: crate::jobs::InvalidJob) -> Failure {
    Failure::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::InvalidJob,
        invalid.message,
    )
    .field(invalid.field)
}

impl From<ServiceError> for Failure {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::InvalidJob { field, message } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidJob,
                message,
            )
            .field(field),
            refused @ ServiceError::InvalidJobInBatch { index, field, .. } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidJob,
                refused.to_string(),
            )
            .field(&format!("jobs[{index}].{field}")),
            in_use @ ServiceError::JobInUse { .. } => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::JobInUse,
                in_use.to_string(),
            ),
            cannot @ ServiceError::CannotStart => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::CannotStart,
                cannot.to_string(),
            ),
            ServiceError::StoredScheduleInvalid(message) => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidJob,
                message,
            ),
            ServiceError::InvalidTrigger { field, message } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidRequest,
                message,
            )
            .field(field),
            ServiceError::InvalidGroup { field, message } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidGroup,
                message,
            )
            .field(field),
            ServiceError::InvalidModule { field, message } => {
                let failure = Failure::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    ErrorCode::InvalidModule,
                    message,
                );
                match field {
                    Some(field) => failure.field(field),
                    None => failure,
                }
            }
            unknown @ ServiceError::UnknownSecret(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownSecret,
                unknown.to_string(),
            ),
            in_use @ ServiceError::SecretInUse { .. } => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::SecretInUse,
                in_use.to_string(),
            ),
            disabled @ ServiceError::SecretsDisabled => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::SecretsDisabled,
                disabled.to_string(),
            ),
            ServiceError::InvalidUser { field, message } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidUser,
                message,
            )
            .field(field),
            exists @ ServiceError::UserExists(_) => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::UserExists,
                exists.to_string(),
            )
            .field("name"),
            ServiceError::InvalidWorkflow { field, message } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidWorkflow,
                message,
            )
            .field(&field),
            state @ ServiceError::WorkflowRunState { .. } => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::NotRunning,
                state.to_string(),
            ),
            unknown @ (ServiceError::UnknownWorkflow(_)
            | ServiceError::UnknownWorkflowRun(_)
            | ServiceError::UnknownWorkflowNode { .. }
            | ServiceError::UnknownCalendar(_)
            | ServiceError::UnknownBackfill(_)) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownJob(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownJob,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownRun(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownRun,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownTenant(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownTenant,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownToken { .. } => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownToken,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownUser(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownUser,
                unknown.to_string(),
            ),
            taken @ ServiceError::AddressTaken(_) => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::AddressTaken,
                taken.to_string(),
            ),
            legacy @ ServiceError::LegacyGroupRegistration(_) => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::InvalidGroup,
                legacy.to_string(),
            ),
            busy @ ServiceError::LoginsBusy(_) => Failure::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::LoginsBusy,
                busy.to_string(),
            )
            .retry_after(1),
            ServiceError::InvalidExecutorToken { field, message } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidRequest,
                message,
            )
            .field(field),
            unknown @ ServiceError::UnknownExecutorToken(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownExecutorToken,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownGroup(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownModule(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownModule,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownVersion { .. } => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownModule,
                unknown.to_string(),
            )
            .field("version"),
            ServiceError::ModuleTooLarge(message) => Failure::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::ModuleTooLarge,
                message,
            ),
            invalid @ ServiceError::InvalidTenant(_) => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidTenant,
                invalid.to_string(),
            )
            .field("name"),
            exists @ ServiceError::TenantExists(_) => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::TenantExists,
                exists.to_string(),
            ),
            ServiceError::InvalidState(message) => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidState,
                message,
            )
            .field("state"),
            ServiceError::QuotaExceeded(exceeded) => Failure::new(
                StatusCode::FORBIDDEN,
                ErrorCode::QuotaExceeded,
                exceeded.to_string(),
            )
            .field(exceeded.quota.as_str()),
            ServiceError::Store(error) => store_failure(error),
        }
    }
}

/// A store error answered: an internal failure, its detail (database text)
/// kept in the admin's log. Handlers that still read the store themselves
/// say so with `.map_err(store_failure)`; the ones that go through a
/// service get this from [`ServiceError::Store`].
pub(crate) fn store_failure(error: StoreError) -> Failure {
    tracing::error!(%error, "store error");
    Failure::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::Internal,
        "internal error; the admin's log has the detail",
    )
}
