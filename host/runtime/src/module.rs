//! Loading a job module: validate, compile or fetch from the artifact cache,
//! link, and keep the pre-instantiated result.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cronbox_protocol::Digest;
use sha2::{Digest as _, Sha256};

use wasmtime::component::Component;

use crate::cache::CacheStatus;
use crate::compiler;
use crate::config::Compiler;
use crate::engine::Runtime;
use crate::errors::{CompileError, LoadError};
use crate::host::{HostState, JobPre};
use crate::validate;

/// A validated, compiled job module, ready to instantiate. Cheap to clone.
#[derive(Clone)]
pub struct JobModule {
    pub(crate) inner: Arc<ModuleInner>,
}

pub(crate) struct ModuleInner {
    pub(crate) digest: Digest,
    pub(crate) pre: JobPre<HostState>,
    cache_status: CacheStatus,
    load_time: Duration,
    size: usize,
    denied_imports: Vec<String>,
}

impl std::fmt::Debug for JobModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobModule")
            .field("digest", &self.inner.digest)
            .field("cache_status", &self.inner.cache_status)
            .finish_non_exhaustive()
    }
}

impl JobModule {
    /// The module's sha256, as lowercase hex: its identity everywhere.
    pub fn digest(&self) -> &Digest {
        &self.inner.digest
    }

    /// Whether loading hit the artifact cache.
    pub fn cache_status(&self) -> CacheStatus {
        self.inner.cache_status
    }

    /// How long validation, compilation or deserialization took.
    pub fn load_time(&self) -> Duration {
        self.inner.load_time
    }

    /// Its imports that link but grant nothing (filesystem, sockets):
    /// every use fails inside the guest.
    pub fn denied_imports(&self) -> &[String] {
        &self.inner.denied_imports
    }

    /// Size of the component in bytes.
    pub fn size(&self) -> usize {
        self.inner.size
    }
}

/// How often, and after what pauses, the image new instances' memories
/// start from is made again when the kernel refuses it.
const MEMORY_IMAGE_RETRIES: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(200),
];

/// Makes the image every instance's linear memory is mapped from (on Linux
/// a sealed memfd) while the module loads, on a blocking thread, instead of
/// at its first run; a refusal is tried again after a pause.
///
/// Sealing a freshly written memfd can fail with `EBUSY` while the kernel
/// still holds its pages (seen once in a test run, loading a Python job):
/// made lazily by the first instantiation, that failed the run as if the
/// guest had trapped. If every attempt fails, the module still loads, and
/// its first instantiation tries once more.
fn prepare_memory_images(digest: &str, mut make: impl FnMut() -> wasmtime::Result<()>) {
    let mut pauses = MEMORY_IMAGE_RETRIES.iter();
    loop {
        let Err(error) = make() else {
            return;
        };
        let Some(pause) = pauses.next() else {
            tracing::warn!(%digest, error = %format!("{error:#}"),
                "cannot make the module's memory image; its first run tries again");
            return;
        };
        tracing::debug!(%digest, error = %format!("{error:#}"),
            "making the module's memory image failed; trying again");
        std::thread::sleep(*pause);
    }
}

/// The sha256 of a module as lowercase hex.
pub fn digest_of(wasm: &[u8]) -> Digest {
    Digest::from_sha256(&Sha256::digest(wasm))
}

impl Runtime {
    /// Validates and compiles a component (or loads its artifact from the
    /// cache). Compilation runs on a blocking thread, off the async workers.
    pub async fn load(&self, wasm: Vec<u8>) -> Result<JobModule, LoadError> {
        let runtime = self.clone();
        tokio::task::spawn_blocking(move || runtime.load_blocking(&wasm))
            .await
            .unwrap_or_else(|join| Err(LoadError::Invalid(format!("the compiler crashed: {join}"))))
    }

    /// [`load`](Self::load) for callers outside an async context.
    pub fn load_blocking(&self, wasm: &[u8]) -> Result<JobModule, LoadError> {
        let started = Instant::now();
        validate::check_preamble(wasm, self.inner.config.max_module_bytes)?;
        let denied_imports = validate::check_interface(wasm)?;
        let digest = digest_of(wasm);
        let engine = &self.inner.engine;
        let config = &self.inner.config;
        let compile = || match &config.compiler {
            Compiler::InProcess => Component::new(engine, wasm),
            Compiler::Subprocess(process) => {
                let artifact = compiler::compile_in_child(
                    process,
                    config.fuel_metering,
                    config.max_wasm_stack_bytes,
                    self.inner.functions.as_deref(),
                    wasm,
                )?;
                // SAFETY: the artifact was just made by this executor's own
                // compiler process from `wasm`, as trusted as compiling it
                // here; wasmtime checks it was made for this engine's
                // settings.
                unsafe { Component::deserialize(engine, &artifact) }
            }
        };
        let (component, cache_status, _entry_lock) = self
            .inner
            .cache
            .load_or_compile(engine, digest.as_str(), compile)
            .map_err(|error| match error.downcast_ref::<CompileError>() {
                Some(bound) => LoadError::Compile(bound.to_string()),
                None => LoadError::Invalid(format!("{error:#}")),
            })?;
        let instance_pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(|error| LoadError::Mismatch(format!("{error:#}")))?;
        let pre =
            JobPre::new(instance_pre).map_err(|error| LoadError::Mismatch(format!("{error:#}")))?;
        if cache_status != CacheStatus::Hit {
            self.inner.cache.store(digest.as_str(), &component);
        }
        prepare_memory_images(digest.as_str(), || {
            component.initialize_copy_on_write_image()
        });
        Ok(JobModule {
            inner: Arc::new(ModuleInner {
                digest,
                pre,
                cache_status,
                load_time: started.elapsed(),
                size: wasm.len(),
                denied_imports,
            }),
        })
    }

    /// Where the artifact of `digest` is cached, if the disk cache is on.
    pub fn artifact_path(&self, digest: &Digest) -> Option<std::path::PathBuf> {
        self.inner.cache.entry_path(digest.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory image the kernel refuses is made again after a pause, up
    /// to the last retry, and never after it succeeds.
    #[test]
    fn a_refused_memory_image_is_made_again_a_bounded_number_of_times() {
        let mut attempts = 0;
        prepare_memory_images("a", || {
            attempts += 1;
            if attempts < 3 {
                Err(wasmtime::format_err!("cannot add seals to the memfd"))
            } else {
                Ok(())
            }
        });
        assert_eq!(attempts, 3, "retried until it was made, then left alone");

        let mut attempts = 0;
        prepare_memory_images("b", || {
            attempts += 1;
            Err(wasmtime::format_err!("cannot add seals to the memfd"))
        });
        assert_eq!(attempts, 1 + MEMORY_IMAGE_RETRIES.len());
    }
}
