//! Settings of the runtime (per process) and limits of a run (per trigger).

use std::path::PathBuf;
use std::time::Duration;

/// Process-wide settings of a [`Runtime`](crate::Runtime).
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// How many instances may be alive at once (warm or running). Sizes the
    /// pooling allocator; past it, new instances wait for a free slot
    /// (back-pressure), they never fail.
    pub max_instances: u32,
    /// The largest linear memory any run may be given; a run's own
    /// [`RunLimits::memory_bytes`] is clamped to it.
    pub memory_ceiling_bytes: u64,
    /// The memory every live instance (warm or running) may be given
    /// together: an instance reserves its run's memory limit from it for
    /// as long as it lives, and waits (like a full pool) when it does not
    /// fit; a limit larger than the whole budget is refused. Rounded up to
    /// whole MiB. `None`: [`DEFAULT_INSTANCE_MEMORY`] per instance slot.
    pub memory_budget_bytes: Option<u64>,
    /// Interval of the epoch ticker: the latency of timeouts and kills.
    pub epoch_tick: Duration,
    /// Where compiled artifacts are cached; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// The file holding the key the cache's entries are signed with; keep
    /// it outside `cache_dir` (created, 0600, when missing). `None`: a key
    /// for this process only (entries of earlier processes are recompiled).
    pub cache_key_file: Option<PathBuf>,
    /// Count fuel in every run, so that [`RunLimits::fuel`] can be enforced
    /// and fuel use reported. Costs some speed; off means fuel budgets are
    /// refused.
    pub fuel_metering: bool,
    /// Largest component accepted by [`Runtime::load`](crate::Runtime::load).
    pub max_module_bytes: usize,
    /// Largest wasm stack of a guest; deeper recursion traps as a stack
    /// overflow.
    pub max_wasm_stack_bytes: usize,
    /// How long a guest's `destroy` may take when an instance is retired.
    pub destroy_timeout: Duration,
    /// Size limits on a job's durable state.
    pub state_limits: StateLimits,
    /// Where components are compiled: in this process, or in a child
    /// process bounded in time and memory.
    pub compiler: Compiler,
    /// The networks a job's outbound HTTP may reach beyond the public
    /// internet (none by default: no loopback, private or link-local
    /// address, whatever the job's grants say).
    pub http_nets: cronbox_net_policy::NetPolicy,
    /// The operator's maximum for each of a run's HTTP limits: a job
    /// asking for more gets this.
    pub http_max: cronbox_protocol::HttpLimits,
}

/// Where components are compiled.
#[derive(Debug, Clone, Default)]
pub enum Compiler {
    /// On a blocking thread of this process: bounded only by the module's
    /// size and function count (checked first). For tools and tests that
    /// compile their own code.
    #[default]
    InProcess,
    /// In a child process with a memory limit and a deadline, so that a
    /// component whose compilation explodes ends that load only.
    Subprocess(CompilerProcess),
}

/// A child process that compiles one component: `program` with `args`
/// runs [`compile_worker`](crate::compile_worker), reading the component on
/// its stdin and writing the compiled artifact to its stdout.
#[derive(Debug, Clone)]
pub struct CompilerProcess {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// CPU time a compilation may use, all its threads together
    /// (`RLIMIT_CPU`, in whole seconds): what bounds a component's
    /// compile, however busy the machine is.
    pub cpu: Duration,
    /// Wall-clock time a compilation may take; the child is killed then.
    /// A backstop: a compile at its low priority on a busy machine takes
    /// far longer than the CPU it uses.
    pub timeout: Duration,
    /// Address space the child may use (`RLIMIT_AS`).
    pub memory_bytes: u64,
}

/// The memory budget per instance slot when none is given: the default
/// memory limit of a run.
pub const DEFAULT_INSTANCE_MEMORY: u64 = 64 << 20;

impl RuntimeConfig {
    /// The memory budget in bytes (see [`RuntimeConfig::memory_budget_bytes`]).
    pub fn memory_budget(&self) -> u64 {
        self.memory_budget_bytes
            .unwrap_or(u64::from(self.max_instances.max(1)) * DEFAULT_INSTANCE_MEMORY)
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            max_instances: 64,
            memory_ceiling_bytes: 1 << 30,
            memory_budget_bytes: None,
            epoch_tick: Duration::from_millis(2),
            cache_dir: None,
            cache_key_file: None,
            fuel_metering: true,
            max_module_bytes: 64 << 20,
            max_wasm_stack_bytes: 512 << 10,
            destroy_timeout: Duration::from_secs(2),
            state_limits: StateLimits::default(),
            compiler: Compiler::InProcess,
            http_nets: cronbox_net_policy::NetPolicy::public_only(),
            http_max: cronbox_protocol::HttpLimits::MAX,
        }
    }
}

/// Size limits on a job's durable key/value state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateLimits {
    /// Longest key, in bytes (keys must also be non-empty).
    pub max_key_bytes: u32,
    /// Longest value, in bytes.
    pub max_value_bytes: u32,
    /// Total of all keys and values of one job, in bytes.
    pub max_total_bytes: u64,
}

impl Default for StateLimits {
    fn default() -> Self {
        StateLimits {
            max_key_bytes: 256,
            max_value_bytes: 64 << 10,
            max_total_bytes: 1 << 20,
        }
    }
}

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Wall-clock deadline, counted from the start of the run (instantiation
    /// and `init` included when the run creates the instance).
    pub timeout: Duration,
    /// Fuel budget (a deterministic measure of executed instructions);
    /// `None` for no budget.
    pub fuel: Option<u64>,
    /// Memory of the instance: all its linear memories together, in bytes.
    pub memory_bytes: u64,
    /// Largest table of the instance, in elements.
    pub table_elements: u32,
    /// Cap on the run's log (stdout, stderr and `log` calls), in bytes.
    pub log_bytes: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            timeout: Duration::from_secs(60),
            fuel: None,
            memory_bytes: 64 << 20,
            table_elements: 20_000,
            log_bytes: 1 << 20,
        }
    }
}

/// Whether a worker keeps its instance between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InstanceMode {
    /// One instance serves run after run: `init` once, `execute` per run.
    /// After any trap, timeout or kill the instance is dropped and the next
    /// run creates a new one.
    #[default]
    Warm,
    /// Every run gets a new instance (`init`, `execute`, `destroy`): no
    /// memory is shared between runs.
    FreshPerRun,
}
