//! Which executor gets a trigger: xxl-job's ten route strategies with its
//! exact semantics.
//!
//! Addresses are given in the group's order (for auto-registered groups,
//! sorted). Per-job state (ROUND counters, LFU counts, LRU order) lives in a
//! [`Router`] per admin process, is cleared every 24 hours, and is not
//! shared between admins — as in xxl-job.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use md5::{Digest, Md5};
use rand::Rng;

pub use crate::model::RouteStrategy;

/// Why no executor was chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error(
        "unknown route strategy {0:?}: use FIRST, LAST, ROUND, RANDOM, CONSISTENT_HASH, \
         LEAST_FREQUENTLY_USED, LEAST_RECENTLY_USED, FAILOVER, BUSYOVER or SHARDING_BROADCAST"
    )]
    UnknownStrategy(String),
    #[error(
        "the executor group has no address (no executor registered or configured; `cronbox \
         executor --group GROUP --admin URL --token TOKEN` starts one; `cronbox up` runs one in group \
         default)"
    )]
    NoAddress,
    #[error("FAILOVER: no executor answered beat ({0})")]
    NoLiveExecutor(String),
    #[error("BUSYOVER: every executor is busy with this job ({0})")]
    AllBusy(String),
}

/// Where a trigger goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// One executor.
    One(String),
    /// SHARDING_BROADCAST: one run per executor, shard `i` of `len` to
    /// `addresses[i]`.
    Broadcast(Vec<String>),
}

/// The liveness checks FAILOVER and BUSYOVER make (executor `beat` and
/// `idle-beat`).
pub trait Probe {
    /// Whether the executor answers `beat`.
    fn beat(&self, address: &str) -> impl Future<Output = bool> + Send;
    /// Whether the job is neither running nor queued on the executor.
    fn idle(&self, address: &str, job_id: u64) -> impl Future<Output = bool> + Send;
}

const COUNT_RESET: u64 = 1_000_000;
const STATE_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// Routes triggers, keeping the per-job state of the stateful strategies.
#[derive(Debug)]
pub struct Router {
    state: Mutex<RouterState>,
}

#[derive(Debug)]
struct RouterState {
    round: HashMap<u64, u64>,
    lfu: HashMap<u64, HashMap<String, u64>>,
    lru: HashMap<u64, VecDeque<String>>,
    cleared_at: Instant,
}

impl Default for Router {
    fn default() -> Self {
        Router {
            state: Mutex::new(RouterState {
                round: HashMap::new(),
                lfu: HashMap::new(),
                lru: HashMap::new(),
                cleared_at: Instant::now(),
            }),
        }
    }
}

/// xxl-job's hash: the first four bytes of the MD5 digest, little-endian.
pub fn xxl_hash(key: &str) -> u32 {
    let digest = Md5::digest(key.as_bytes());
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// CONSISTENT_HASH: 100 virtual nodes per address keyed
/// `SHARD-{address}-NODE-{i}`, the job keyed by its id in decimal; the
/// first node at or after the job's hash, wrapping to the first node.
pub fn consistent_hash_pick(job_id: u64, addresses: &[String]) -> Option<&String> {
    let mut ring: BTreeMap<u32, &String> = BTreeMap::new();
    for address in addresses {
        for node in 0..100 {
            ring.insert(xxl_hash(&format!("SHARD-{address}-NODE-{node}")), address);
        }
    }
    let key = xxl_hash(&job_id.to_string());
    ring.range(key..)
        .next()
        .or_else(|| ring.iter().next())
        .map(|(_, address)| *address)
}

impl Router {
    fn lock(&self) -> std::sync::MutexGuard<'_, RouterState> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if state.cleared_at.elapsed() > STATE_LIFETIME {
            state.round.clear();
            state.lfu.clear();
            state.lru.clear();
            state.cleared_at = Instant::now();
        }
        state
    }

    /// Picks the executor(s) for a trigger of `job_id` among `addresses`.
    pub async fn route<P: Probe>(
        &self,
        strategy: RouteStrategy,
        job_id: u64,
        addresses: &[String],
        probe: &P,
    ) -> Result<Route, RouteError> {
        if addresses.is_empty() {
            return Err(RouteError::NoAddress);
        }
        let pick = |index: usize| Ok(Route::One(addresses[index].clone()));
        match strategy {
            RouteStrategy::First => pick(0),
            RouteStrategy::Last => pick(addresses.len() - 1),
            RouteStrategy::Random => pick(rand::rng().random_range(0..addresses.len())),
            RouteStrategy::Round => {
                let mut state = self.lock();
                let count = state
                    .round
                    .entry(job_id)
                    .and_modify(|count| *count += 1)
                    .or_insert_with(|| rand::rng().random_range(0..100));
                if *count > COUNT_RESET {
                    *count = rand::rng().random_range(0..100);
                }
                let index = (*count % addresses.len() as u64) as usize;
                pick(index)
            }
            RouteStrategy::ConsistentHash => Ok(Route::One(
                consistent_hash_pick(job_id, addresses)
                    .ok_or(RouteError::NoAddress)?
                    .clone(),
            )),
            RouteStrategy::LeastFrequentlyUsed => {
                let mut state = self.lock();
                let counts = state.lfu.entry(job_id).or_default();
                counts.retain(|address, _| addresses.contains(address));
                for address in addresses {
                    let count = counts
                        .entry(address.clone())
                        .or_insert_with(|| rand::rng().random_range(0..addresses.len() as u64));
                    if *count > COUNT_RESET {
                        *count = 0;
                    }
                }
                let chosen = addresses
                    .iter()
                    .min_by_key(|address| counts[*address])
                    .expect("addresses is not empty")
                    .clone();
                *counts.get_mut(&chosen).expect("just inserted") += 1;
                Ok(Route::One(chosen))
            }
            RouteStrategy::LeastRecentlyUsed => {
                let mut state = self.lock();
                let order = state.lru.entry(job_id).or_default();
                order.retain(|address| addresses.contains(address));
                for address in addresses {
                    if !order.contains(address) {
                        order.push_back(address.clone());
                    }
                }
                let chosen = order.pop_front().expect("addresses is not empty");
                order.push_back(chosen.clone());
                Ok(Route::One(chosen))
            }
            RouteStrategy::Failover => {
                let mut transcript = Vec::new();
                for address in addresses {
                    if probe.beat(address).await {
                        return Ok(Route::One(address.clone()));
                    }
                    transcript.push(format!("{address}: no beat"));
                }
                Err(RouteError::NoLiveExecutor(transcript.join("; ")))
            }
            RouteStrategy::Busyover => {
                let mut transcript = Vec::new();
                for address in addresses {
                    if probe.idle(address, job_id).await {
                        return Ok(Route::One(address.clone()));
                    }
                    transcript.push(format!("{address}: busy"));
                }
                Err(RouteError::AllBusy(transcript.join("; ")))
            }
            RouteStrategy::ShardingBroadcast => Ok(Route::Broadcast(addresses.to_vec())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    struct FakeProbe {
        dead: HashSet<String>,
        busy: HashSet<String>,
    }

    impl Probe for FakeProbe {
        async fn beat(&self, address: &str) -> bool {
            !self.dead.contains(address)
        }
        async fn idle(&self, address: &str, _job_id: u64) -> bool {
            !self.busy.contains(address)
        }
    }

    fn addresses() -> Vec<String> {
        (1..=3).map(|i| format!("http://10.0.0.{i}:9999")).collect()
    }

    fn probe() -> FakeProbe {
        FakeProbe {
            dead: HashSet::new(),
            busy: HashSet::new(),
        }
    }

    fn one(route: Route) -> String {
        match route {
            Route::One(address) => address,
            Route::Broadcast(_) => panic!("expected one address"),
        }
    }

    /// A minimal executor for these futures, which never actually wait.
    fn block_on<F: Future>(future: F) -> F::Output {
        use std::task::{Context, Poll, Waker};
        let mut future = std::pin::pin!(future);
        let mut context = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
                return output;
            }
        }
    }

    #[test]
    fn consistent_hash_reproduces_xxl_job() {
        // Expected picks computed independently from xxl-job's formula.
        let expected = [
            (1, "http://10.0.0.2:9999"),
            (2, "http://10.0.0.1:9999"),
            (3, "http://10.0.0.3:9999"),
            (7, "http://10.0.0.3:9999"),
            (42, "http://10.0.0.2:9999"),
            (100, "http://10.0.0.3:9999"),
            (1000, "http://10.0.0.3:9999"),
            (65535, "http://10.0.0.2:9999"),
        ];
        let router = Router::default();
        for (job, address) in expected {
            let picked =
                block_on(router.route(RouteStrategy::ConsistentHash, job, &addresses(), &probe()));
            assert_eq!(one(picked.unwrap()), address, "job {job}");
        }
    }

    #[test]
    fn first_last_random_and_broadcast() {
        let router = Router::default();
        let list = addresses();
        let route = |strategy| block_on(router.route(strategy, 1, &list, &probe())).unwrap();
        assert_eq!(one(route(RouteStrategy::First)), list[0]);
        assert_eq!(one(route(RouteStrategy::Last)), list[2]);
        let randoms: HashSet<String> = (0..200)
            .map(|_| one(route(RouteStrategy::Random)))
            .collect();
        assert_eq!(randoms.len(), 3, "random reaches every executor");
        assert_eq!(
            route(RouteStrategy::ShardingBroadcast),
            Route::Broadcast(list.clone())
        );
        let empty = block_on(router.route(RouteStrategy::First, 1, &[], &probe()));
        assert_eq!(empty, Err(RouteError::NoAddress));
    }

    #[test]
    fn round_cycles_through_every_executor_per_job() {
        let router = Router::default();
        let list = addresses();
        let picks: Vec<String> = (0..6)
            .map(|_| one(block_on(router.route(RouteStrategy::Round, 9, &list, &probe())).unwrap()))
            .collect();
        let start = list.iter().position(|a| *a == picks[0]).unwrap();
        for (i, pick) in picks.iter().enumerate() {
            assert_eq!(*pick, list[(start + i) % 3]);
        }
    }

    #[test]
    fn least_frequently_and_recently_used_spread_the_load() {
        let router = Router::default();
        let list = addresses();
        let mut counts: HashMap<String, u32> = HashMap::new();
        for _ in 0..30 {
            let pick =
                one(
                    block_on(router.route(RouteStrategy::LeastFrequentlyUsed, 5, &list, &probe()))
                        .unwrap(),
                );
            *counts.entry(pick).or_default() += 1;
        }
        let (min, max) = (
            counts.values().min().unwrap(),
            counts.values().max().unwrap(),
        );
        assert!(max - min <= 3, "LFU evens out: {counts:?}");

        let lru: Vec<String> = (0..6)
            .map(|_| {
                one(
                    block_on(router.route(RouteStrategy::LeastRecentlyUsed, 5, &list, &probe()))
                        .unwrap(),
                )
            })
            .collect();
        assert_eq!(lru[..3], list[..], "never-used executors first, in order");
        assert_eq!(lru[3..], list[..], "then the least recently used");
        // A vanished executor is forgotten; a new one is used first.
        let changed = vec![
            list[1].clone(),
            list[2].clone(),
            "http://10.0.0.4:9999".to_owned(),
        ];
        let next =
            one(
                block_on(router.route(RouteStrategy::LeastRecentlyUsed, 5, &changed, &probe()))
                    .unwrap(),
            );
        assert_eq!(next, list[1]);
    }

    #[test]
    fn failover_skips_dead_and_busyover_skips_busy_executors() {
        let router = Router::default();
        let list = addresses();
        let probe = FakeProbe {
            dead: [list[0].clone()].into(),
            busy: [list[0].clone(), list[1].clone()].into(),
        };
        let failover = block_on(router.route(RouteStrategy::Failover, 1, &list, &probe));
        assert_eq!(one(failover.unwrap()), list[1]);
        let busyover = block_on(router.route(RouteStrategy::Busyover, 1, &list, &probe));
        assert_eq!(one(busyover.unwrap()), list[2]);
        let all_dead = FakeProbe {
            dead: list.iter().cloned().collect(),
            busy: HashSet::new(),
        };
        let error =
            block_on(router.route(RouteStrategy::Failover, 1, &list, &all_dead)).unwrap_err();
        assert!(
            error.to_string().contains("no executor answered beat"),
            "{error}"
        );
    }
}
