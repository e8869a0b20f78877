//! Checks that a module is a component for world `cronbox:job/job` that
//! imports nothing the host does not grant, with errors that name the
//! problem.

use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use crate::module::LoadError;

/// Interfaces a job may import (by name, without version). Everything else
/// (filesystem, sockets, http, ...) is refused.
pub(crate) const GRANTED_INTERFACES: &[&str] = &[
    "cronbox:job/context",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
];

/// The functions world `job` exports.
const REQUIRED_EXPORTS: &[&str] = &["init", "execute", "destroy"];

const MAGIC: &[u8; 4] = b"\0asm";
const CORE_VERSION: [u8; 4] = [1, 0, 0, 0];
const COMPONENT_LAYER: [u8; 2] = [1, 0];

/// Cheap checks on the bytes, before any compilation.
pub(crate) fn check_preamble(wasm: &[u8], max_bytes: usize) -> Result<(), LoadError> {
    if wasm.is_empty() {
        return Err(LoadError::Empty);
    }
    if wasm.len() > max_bytes {
        return Err(LoadError::TooLarge {
            size: wasm.len(),
            limit: max_bytes,
        });
    }
    if wasm.len() < 8 || &wasm[..4] != MAGIC {
        return Err(LoadError::NotWasm);
    }
    if wasm[4..8] == CORE_VERSION {
        return Err(LoadError::CoreModule);
    }
    if wasm[6..8] != COMPONENT_LAYER {
        return Err(LoadError::Invalid(format!(
            "unknown WebAssembly binary layer {:?} (expected a component)",
            &wasm[4..8]
        )));
    }
    Ok(())
}

/// Checks a compiled component's imports and exports against world `job`.
pub(crate) fn check_world(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
    let forbidden: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name)
        .filter(|name| {
            let interface = name.split('@').next().unwrap_or(name);
            !GRANTED_INTERFACES.contains(&interface)
        })
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
