//! What makes a WebAssembly binary a cronbox job, checked without running
//! it: the admin refuses a bad upload before storing anything, and the
//! runtime shares the same lists (it checks the types again with wasmtime
//! when it compiles).
//!
//! A job is a component (not a core module) that validates, exports the
//! functions of world `cronbox:job/job` (`init`, `execute`, `destroy`) and
//! imports nothing beyond [`GRANTED_INTERFACES`] and
//! [`DENIED_INTERFACES`] (linked to a context that grants nothing: every
//! use fails inside the guest).

/// The proposals' set, as wasmparser (and wasmtime's engine) take it.
pub use wasmparser::WasmFeatures;
use wasmparser::{ComponentExternalKind, Parser, Payload, Validator};

/// Interfaces a job may import and use (by name, without version); outbound
/// HTTP within the job's grants. Everything not here or in
/// [`DENIED_INTERFACES`] is refused.
pub const GRANTED_INTERFACES: &[&str] = &[
    "cronbox:job/context",
    "wasi:config/store",
    "wasi:http/outgoing-handler",
    "wasi:http/types",
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

/// Interfaces a job may import but not use: they are linked to a context
/// with no preopened directory and no permitted socket address, so every
/// call fails inside the guest with the interface's own error. Language
/// runtimes (CPython, StarlingMonkey, Rust's std) import them whether or
/// not the job uses them.
pub const DENIED_INTERFACES: &[&str] = &[
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
];

/// The functions world `job` exports.
pub const REQUIRED_EXPORTS: &[&str] = &["init", "execute", "destroy"];

const MAGIC: &[u8; 4] = b"\0asm";
const CORE_VERSION: [u8; 4] = [1, 0, 0, 0];
const COMPONENT_LAYER: [u8; 2] = [1, 0];

/// Why a binary is not a cronbox job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComponentError {
    #[error("the module is empty (0 bytes)")]
    Empty,
    #[error("the module is {size} bytes, over the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    #[error("not a WebAssembly binary: it does not start with the \\0asm magic")]
    NotWasm,
    #[error("this is a core WebAssembly module, not a component: build the job for wasm32-wasip2")]
    CoreModule,
    #[error("not a valid component: {0}")]
    Invalid(String),
    #[error(
        "the component imports what jobs are not granted: {} (jobs may use clocks, random, \
         stdio, configuration, outbound HTTP and cronbox:job/context; filesystem and sockets \
         link but grant nothing)",
        imports.join(", ")
    )]
    ForbiddenImport { imports: Vec<String> },
    #[error(
        "not a component for world cronbox:job/job: it does not export the function `{missing}` \
         (its exports: {})",
        if exports.is_empty() { "none".to_owned() } else { exports.join(", ") }
    )]
    WrongWorld {
        missing: String,
        exports: Vec<String>,
    },
    /// More functions (which bound the work of compiling it), or more core
    /// instances, memories or tables (which a job's share of the instance
    /// pool holds) than a job may have.
    #[error("the component has {count} {what}, over the limit of {limit} for a job")]
    OverLimit {
        what: &'static str,
        count: u64,
        limit: u64,
    },
}

/// Most functions a job's core modules may define together: what bounds
/// the work of compiling it (CPython as a component defines tens of
/// thousands).
pub const MAX_FUNCTIONS: u64 = 200_000;

/// Core instances, linear memories and tables one job component may
/// create: its share of the runtime's pooling allocator, which holds this
/// many per instance slot so that no component can take another's. A Rust
/// `wasm32-wasip2` component creates about 3, 1 and 2; CPython built by
/// componentize-py creates 9 core instances, StarlingMonkey (JavaScript,
/// componentize-js) fewer.
pub const MAX_CORE_INSTANCES: usize = 16;
/// See [`MAX_CORE_INSTANCES`].
pub const MAX_MEMORIES: usize = 2;
/// See [`MAX_CORE_INSTANCES`].
pub const MAX_TABLES: usize = 4;

/// Cheap checks on the bytes: not empty, not over `max_bytes`, WebAssembly,
/// a component.
pub fn check_preamble(wasm: &[u8], max_bytes: usize) -> Result<(), ComponentError> {
    if wasm.is_empty() {
        return Err(ComponentError::Empty);
    }
    if wasm.len() > max_bytes {
        return Err(ComponentError::TooLarge {
            size: wasm.len(),
            limit: max_bytes,
        });
    }
    if wasm.len() < 8 || &wasm[..4] != MAGIC {
        return Err(ComponentError::NotWasm);
    }
    if wasm[4..8] == CORE_VERSION {
        return Err(ComponentError::CoreModule);
    }
    if wasm[6..8] != COMPONENT_LAYER {
        return Err(ComponentError::Invalid(format!(
            "unknown WebAssembly binary layer {:?} (expected a component)",
            &wasm[4..8]
        )));
    }
    check_counts(wasm)
}

/// Counts, from the section headers (no validation, no compilation), the
/// functions of every core module and the core instances, memories and
/// tables the component creates when instantiated, and refuses more than
/// [`MAX_FUNCTIONS`], [`MAX_CORE_INSTANCES`], [`MAX_MEMORIES`] or
/// [`MAX_TABLES`].
///
/// A core instantiation counts the memories and tables its module defines.
/// A module reached through an alias or an import counts none, and a nested
/// component counts once however often it is instantiated: the figures are
/// a lower bound, exact for the flat components toolchains make. The
/// runtime's pooling allocator checks the exact figures at load.
fn check_counts(wasm: &[u8]) -> Result<(), ComponentError> {
    /// What one core module defines.
    #[derive(Default, Clone, Copy)]
    struct Defines {
        memories: u32,
        tables: u32,
    }
    enum Scope {
        Module(Defines),
        /// The modules defined in a component, in index order.
        Component(Vec<Defines>),
    }
    let mut scopes = vec![Scope::Component(Vec::new())];
    let (mut functions, mut instances, mut memories, mut tables) = (0_u64, 0_u64, 0_u64, 0_u64);
    for payload in Parser::new(0).parse_all(wasm) {
        // What does not parse is reported by validation, with more detail.
        let Ok(payload) = payload else {
            return Ok(());
        };
        match payload {
            Payload::ModuleSection { .. } => scopes.push(Scope::Module(Defines::default())),
            Payload::ComponentSection { .. } => scopes.push(Scope::Component(Vec::new())),
            Payload::End(_) => {
                if let Some(Scope::Module(defines)) = scopes.pop()
                    && let Some(Scope::Component(modules)) = scopes.last_mut()
                {
                    modules.push(defines);
                }
            }
            Payload::FunctionSection(reader) => functions += u64::from(reader.count()),
            Payload::MemorySection(reader) => {
                if let Some(Scope::Module(defines)) = scopes.last_mut() {
                    defines.memories += reader.count();
                }
            }
            Payload::TableSection(reader) => {
                if let Some(Scope::Module(defines)) = scopes.last_mut() {
                    defines.tables += reader.count();
                }
            }
            Payload::InstanceSection(reader) => {
                let Some(Scope::Component(modules)) = scopes.last() else {
                    continue;
                };
                for instance in reader.into_iter().flatten() {
                    if let wasmparser::Instance::Instantiate { module_index, .. } = instance {
                        instances += 1;
                        let defines = modules.get(module_index as usize).copied();
                        let defines = defines.unwrap_or_default();
                        memories += u64::from(defines.memories);
                        tables += u64::from(defines.tables);
                    }
                }
            }
            _ => {}
        }
        for (what, count, limit) in [
            ("functions", functions, MAX_FUNCTIONS),
            ("core instances", instances, MAX_CORE_INSTANCES as u64),
            ("linear memories", memories, MAX_MEMORIES as u64),
            ("tables", tables, MAX_TABLES as u64),
        ] {
            if count > limit {
                return Err(ComponentError::OverLimit { what, count, limit });
            }
        }
    }
    Ok(())
}

/// Whether an import name (`wasi:io/streams@0.2.6`) is granted.
pub fn is_granted(import: &str) -> bool {
    GRANTED_INTERFACES.contains(&interface_of(import))
}

/// Whether an import name is linked but denied at use.
pub fn is_denied_at_use(import: &str) -> bool {
    DENIED_INTERFACES.contains(&interface_of(import))
}

fn interface_of(import: &str) -> &str {
    import.split('@').next().unwrap_or(import)
}

/// The WebAssembly features a job may use: wasmparser's defaults (the
/// component model and WebAssembly 3.0) without the proposals cronbox
/// does not run — several memories in one core module, 64-bit memories,
/// garbage-collected types, exceptions, threads (shared memories and
/// atomics) and the component model's async. The runtime's engine is
/// configured with exactly these (`code_config`), and an upload is
/// validated with them: what passes here compiles there, and what the
/// engine would refuse is refused at upload, naming the feature.
pub fn job_features() -> WasmFeatures {
    WasmFeatures::default()
        .difference(WasmFeatures::MULTI_MEMORY)
        .difference(WasmFeatures::MEMORY64)
        .difference(WasmFeatures::GC)
        .difference(WasmFeatures::GC_TYPES)
        .difference(WasmFeatures::EXCEPTIONS)
        .difference(WasmFeatures::LEGACY_EXCEPTIONS)
        .difference(WasmFeatures::THREADS)
        .difference(WasmFeatures::SHARED_EVERYTHING_THREADS)
        .difference(WasmFeatures::CM_ASYNC)
        .difference(WasmFeatures::CM_ASYNC_STACKFUL)
        .difference(WasmFeatures::CM_MORE_ASYNC_BUILTINS)
        .difference(WasmFeatures::CM_THREADING)
}

/// What a component that passed the checks imports without being able to
/// use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// Its imports of [`DENIED_INTERFACES`] (with their versions): linked,
    /// but every call fails inside the guest. An author learns here that,
    /// say, `std::fs` will not work.
    pub denied_imports: Vec<String>,
}

/// Every check: the preamble, full validation, the top-level imports
/// against [`GRANTED_INTERFACES`] and [`DENIED_INTERFACES`], and the
/// exports of world `job`.
pub fn check_component(wasm: &[u8], max_bytes: usize) -> Result<Checked, ComponentError> {
    check_preamble(wasm, max_bytes)?;
    validate(wasm)?;
    check_interface(wasm)
}

/// Full validation with [`job_features`] alone (no preamble, import or
/// export check).
pub fn validate(wasm: &[u8]) -> Result<(), ComponentError> {
    Validator::new_with_features(job_features())
        .validate_all(wasm)
        .map(drop)
        .map_err(|error| ComponentError::Invalid(error.to_string()))
}

/// The top-level imports against [`GRANTED_INTERFACES`] and
/// [`DENIED_INTERFACES`] and the exports of world `job`, read from the
/// binary without validating it: cheap enough to run before compiling
/// (which validates).
pub fn check_interface(wasm: &[u8]) -> Result<Checked, ComponentError> {
    let mut imports = Vec::new();
    let mut exports: Vec<(String, bool)> = Vec::new();
    // Nested modules and components have their own sections; only the
    // outermost component's imports and exports are the job's.
    let mut depth = 0_usize;
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload.map_err(|error| ComponentError::Invalid(error.to_string()))?;
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    let import =
                        import.map_err(|error| ComponentError::Invalid(error.to_string()))?;
                    imports.push(import.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    let export =
                        export.map_err(|error| ComponentError::Invalid(error.to_string()))?;
                    exports.push((
                        export.name.name.to_owned(),
                        export.kind == ComponentExternalKind::Func,
                    ));
                }
            }
            _ => {}
        }
    }
    let forbidden: Vec<String> = imports
        .iter()
        .filter(|import| !is_granted(import) && !is_denied_at_use(import))
        .cloned()
        .collect();
    if !forbidden.is_empty() {
        return Err(ComponentError::ForbiddenImport { imports: forbidden });
    }
    for required in REQUIRED_EXPORTS {
        if !exports
            .iter()
            .any(|(name, is_func)| name == required && *is_func)
        {
            return Err(ComponentError::WrongWorld {
                missing: (*required).to_owned(),
                exports: exports.into_iter().map(|(name, _)| name).collect(),
            });
        }
    }
    Ok(Checked {
        denied_imports: imports
            .into_iter()
            .filter(|import| is_denied_at_use(import))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cronbox_example_jobs as jobs;

    const LIMIT: usize = 64 << 20;

    #[test]
    fn every_example_job_passes() {
        for name in jobs::JOBS {
            let checked = check_component(&jobs::bytes(name), LIMIT);
            assert!(checked.is_ok(), "{name}: {checked:?}");
        }
    }

    #[test]
    fn refused_fixtures_name_what_is_wrong() {
        match check_component(&jobs::bytes("wrong-world"), LIMIT) {
            Err(ComponentError::WrongWorld { missing, .. }) => assert_eq!(missing, "init"),
            other => panic!("wrong-world: {other:?}"),
        }
        match check_component(&jobs::bytes("foreign-import"), LIMIT) {
            Err(ComponentError::ForbiddenImport { imports }) => {
                assert_eq!(imports, ["acme:vault/keys"])
            }
            other => panic!("foreign-import: {other:?}"),
        }
    }

    #[test]
    fn filesystem_and_socket_imports_pass_as_denied_at_use() {
        for (fixture, interface) in jobs::DENIED_FIXTURES
            .iter()
            .zip(["wasi:filesystem/", "wasi:sockets/"])
        {
            let denied = check_component(&jobs::bytes(fixture), LIMIT)
                .unwrap()
                .denied_imports;
            assert!(
                denied.iter().any(|import| import.starts_with(interface)),
                "{fixture}: {denied:?}"
            );
        }
        assert!(is_denied_at_use("wasi:sockets/tcp@0.2.9"));
        assert!(is_denied_at_use("wasi:filesystem/preopens@0.2.0"));
        assert!(!is_granted("wasi:filesystem/preopens@0.2.0"));
        assert!(is_granted("wasi:http/outgoing-handler@0.2.6"));
        assert!(!is_granted("wasi:http/incoming-handler@0.2.6"));
        assert!(!is_denied_at_use("wasi:http/incoming-handler@0.2.6"));
    }

    #[test]
    fn bytes_that_are_not_a_component_are_refused() {
        assert_eq!(check_component(b"", LIMIT), Err(ComponentError::Empty));
        assert_eq!(
            check_component(b"garbage!", LIMIT),
            Err(ComponentError::NotWasm)
        );
        assert_eq!(
            check_component(b"\0asm\x01\0\0\0", LIMIT),
            Err(ComponentError::CoreModule)
        );
        let hello = jobs::bytes("hello");
        assert_eq!(
            check_component(&hello, 100),
            Err(ComponentError::TooLarge {
                size: hello.len(),
                limit: 100
            })
        );
        let mut cut = hello.clone();
        cut.truncate(hello.len() / 2);
        assert!(matches!(
            check_component(&cut, LIMIT),
            Err(ComponentError::Invalid(_))
        ));
    }

    /// Validation uses the features the runtime enables: a component whose
    /// core module has two memories, a 64-bit memory, a garbage-collected
    /// type, an exception tag or a shared memory is refused at upload,
    /// naming the feature.
    #[test]
    fn features_the_runtime_turns_off_are_refused_at_upload() {
        for (memories, feature) in FEATURES_TURNED_OFF {
            let wasm = wat::parse_str(format!("(component (core module {memories}))")).unwrap();
            match check_component(&wasm, LIMIT) {
                Err(ComponentError::Invalid(message)) => {
                    assert!(message.contains(feature), "{memories}: {message}")
                }
                other => panic!("{memories}: {other:?}"),
            }
        }
    }

    /// A core module using each proposal the runtime turns off, and the
    /// words wasmparser's refusal names it with.
    const FEATURES_TURNED_OFF: [(&str, &str); 5] = [
        ("(memory 1) (memory 1)", "multiple memories"),
        ("(memory i64 1)", "memory64"),
        ("(type (struct (field i32)))", "gc"),
        ("(tag)", "exceptions"),
        ("(memory 1 1 shared)", "threads"),
    ];

    /// Too many functions are refused from the section headers, before
    /// validation or compilation.
    #[test]
    fn too_many_functions_are_refused_before_any_compile() {
        let functions = "(func)".repeat(MAX_FUNCTIONS as usize + 1);
        let wasm = wat::parse_str(format!("(component (core module {functions}))")).unwrap();
        assert_eq!(
            check_preamble(&wasm, LIMIT),
            Err(ComponentError::OverLimit {
                what: "functions",
                count: MAX_FUNCTIONS + 1,
                limit: MAX_FUNCTIONS
            })
        );
    }

    /// Core instances, and the memories and tables their modules define,
    /// are counted from the headers; a module defined but never
    /// instantiated counts nothing.
    #[test]
    fn more_instances_memories_or_tables_than_a_job_may_have_are_refused() {
        let component = |modules: &str, instances: &str| {
            wat::parse_str(format!("(component {modules} {instances})")).unwrap()
        };
        let instantiate = |module: &str, times: usize| {
            format!("(core instance (instantiate {module}))").repeat(times)
        };
        let over = |what, count, limit| Err(ComponentError::OverLimit { what, count, limit });
        let cases = [
            (
                "(core module $m)",
                instantiate("$m", MAX_CORE_INSTANCES + 1),
                over(
                    "core instances",
                    MAX_CORE_INSTANCES as u64 + 1,
                    MAX_CORE_INSTANCES as u64,
                ),
            ),
            (
                "(core module $m (memory 1))",
                instantiate("$m", 3),
                over("linear memories", 3, 2),
            ),
            (
                "(core module $m (table 1 funcref))",
                instantiate("$m", 5),
                over("tables", 5, 4),
            ),
            (
                "(core module $m (memory 1) (table 1 funcref))",
                instantiate("$m", 2),
                Ok(()),
            ),
            (
                "(core module $m) (core module $unused (memory 1))",
                instantiate("$m", MAX_CORE_INSTANCES),
                Ok(()),
            ),
        ];
        for (modules, instances, expected) in cases {
            assert_eq!(
                check_preamble(&component(modules, &instances), LIMIT),
                expected,
                "{modules} {instances}"
            );
        }
    }
}
