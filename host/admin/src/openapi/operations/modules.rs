//! Modules: uploads, versions, rollbacks, labels.

use super::*;

pub(super) fn operations() -> Vec<Operation> {
    vec![
        Operation {
            query: vec![
                (
                    "name",
                    text(),
                    "Module name: the upload becomes its next version",
                ),
                (
                    "labels",
                    text(),
                    "Comma-separated labels for the new version",
                ),
            ],
            body_content: Some(json!({
                "application/octet-stream": { "schema": { "type": "string", "format": "binary" } },
                "multipart/form-data": { "schema": {
                    "type": "object",
                    "required": ["module"],
                    "additionalProperties": false,
                    "properties": {
                        "module": { "type": "string", "format": "binary" },
                        "name": { "type": "string" },
                        "labels": { "type": "string" }
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
        },
        op(
            "get",
            "/api/v1/modules",
            "modules",
            "The latest version of each named module",
            None,
            "200",
            array_of(schema("TenantModule")),
        ),
        op(
            "get",
            "/api/v1/modules/{name}/versions",
            "modules",
            "A module's versions, newest first",
            None,
            "200",
            array_of(schema("ModuleVersion")),
        ),
        op(
            "post",
            "/api/v1/modules/{name}/rollback",
            "modules",
            "Make an earlier version current again (as a new version)",
            Some(schema("VersionChoice")),
            "201",
            schema("RolledBack"),
        ),
        op(
            "put",
            "/api/v1/modules/{name}/labels/{label}",
            "modules",
            "Put a label on one version",
            Some(schema("VersionChoice")),
            "200",
            array_of(schema("ModuleVersion")),
        ),
    ]
}
