//! Checks that a module is a component for world `cronbox:job/job` that
//! imports nothing the host does not link, with errors that name the
//! problem: `cronbox-component-check`'s, on the bytes, before compiling.

use crate::errors::LoadError;

/// Cheap checks on the bytes, before any compilation (shared with the
/// admin's upload checks).
pub(crate) fn check_preamble(wasm: &[u8], max_bytes: usize) -> Result<(), LoadError> {
    Ok(cronbox_component_check::check_preamble(wasm, max_bytes)?)
}

/// The imports and exports read from the bytes, before any compilation:
/// a component importing what cronbox does not link, or for another
/// world, is refused without the cost of compiling it (the linker's
/// `instantiate_pre` then checks the types). Answers the imports that link
/// but grant nothing.
pub(crate) fn check_interface(wasm: &[u8]) -> Result<Vec<String>, LoadError> {
    Ok(cronbox_component_check::check_interface(wasm)?.denied_imports)
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
