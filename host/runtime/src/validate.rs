//! Checks that a module is a component for world `cronbox:job/job` that
//! imports nothing the host does not grant, with errors that name the
//! problem.

use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use crate::module::LoadError;

use cronbox_component_check::{ComponentError, is_denied_at_use, is_granted};
pub(crate) use cronbox_component_check::{GRANTED_INTERFACES, REQUIRED_EXPORTS};

/// Cheap checks on the bytes, before any compilation (shared with the
/// admin's upload checks).
pub(crate) fn check_preamble(wasm: &[u8], max_bytes: usize) -> Result<(), LoadError> {
    cronbox_component_check::check_preamble(wasm, max_bytes).map_err(|error| match error {
        ComponentError::Empty => LoadError::Empty,
        ComponentError::TooLarge { size, limit } => LoadError::TooLarge { size, limit },
        ComponentError::NotWasm => LoadError::NotWasm,
        ComponentError::CoreModule => LoadError::CoreModule,
        ComponentError::OverLimit { what, count, limit } => {
            LoadError::OverLimit { what, count, limit }
        }
        other => LoadError::Invalid(other.to_string()),
    })
}

/// The imports and exports read from the bytes, before any compilation:
/// a component importing what cronbox does not link, or for another
/// world, is refused without the cost of compiling it. Answers the
/// imports that link but grant nothing.
pub(crate) fn check_interface(wasm: &[u8]) -> Result<Vec<String>, LoadError> {
    match cronbox_component_check::check_interface(wasm) {
        Ok(checked) => Ok(checked.denied_imports),
        Err(ComponentError::ForbiddenImport { imports }) => {
            Err(LoadError::ForbiddenImport { imports })
        }
        Err(ComponentError::WrongWorld { missing, exports }) => {
            Err(LoadError::WrongWorld { missing, exports })
        }
        Err(other) => Err(LoadError::Invalid(other.to_string())),
    }
}

/// Checks a compiled component's imports and exports against world `job`.
pub(crate) fn check_world(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
    let forbidden: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name)
        .filter(|name| !is_granted(name) && !is_denied_at_use(name))
        .map(str::to_owned)
        .collect();
    if !forbidden.is_empty() {
        return Err(LoadError::ForbiddenImport { imports: forbidden });
    }
    let exports: Vec<(String, bool)> = ty
        .exports(engine)
        .map(|(name, item)| {
            (
                name.to_owned(),
                matches!(item.ty, ComponentItem::ComponentFunc(_)),
            )
        })
        .collect();
    for required in REQUIRED_EXPORTS {
        let found = exports
            .iter()
            .any(|(name, is_func)| name == required && *is_func);
        if !found {
            return Err(LoadError::WrongWorld {
                missing: (*required).to_owned(),
                exports: exports.iter().map(|(name, _)| name.clone()).collect(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_names_the_problem() {
        assert!(matches!(check_preamble(b"", 10), Err(LoadError::Empty)));
        assert!(matches!(
            check_preamble(b"garbage!", 100),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(
            check_preamble(b"\0asm\x01\0\0\0", 100),
            Err(LoadError::CoreModule)
        ));
        assert!(matches!(
            check_preamble(&[0; 20], 10),
            Err(LoadError::TooLarge {
                size: 20,
                limit: 10
            })
        ));
        assert!(check_preamble(b"\0asm\x0d\0\x01\0", 100).is_ok());
    }
}
