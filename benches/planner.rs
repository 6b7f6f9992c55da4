//! The pure planner and the in-memory store: speed, memory, and cleanup.
//!
//! - Decisions per second: one decision is a `Planner::plan` on a pushback
//!   followed by the `Planner::claim` of the planned retry, on a
//!   `TaskState` with fixed `tokio::time::Instant` times (no runtime).
//! - Bytes per in-flight entry: `size_of::<TaskState>()`, and the heap
//!   bytes a `KeyedPlanner<u64>`, a `KeyedPlanner<String>` and
//!   `MemoryStore` leases hold for 100k running tasks, counted by a global
//!   allocator that wraps `System` (requested sizes, so malloc's own
//!   per-block overhead is not included).
//! - Cleanup: 100k keyed tasks run to their end (begin, claim, pushback,
//!   claim, end; acquire, release) and the maps end with `len() == 0`.
//!
//! ```text
//! cargo bench --bench planner
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use criterion::{Criterion, Throughput};
use reqwest_backpressure::planner::{Claim, Decision, KeyedPlanner, Planner, Pushback, TaskState};
use reqwest_backpressure::store::Store;
use reqwest_backpressure::{Hint, MemoryStore, Policy};
use tokio::time::Instant;

/// Counts the bytes currently allocated and the allocations made.
struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`; the counters are
// only updated on success.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A snapshot of the allocator's counters.
#[derive(Clone, Copy)]
struct Mem {
    bytes: isize,
    allocations: usize,
}

impl Mem {
    fn now() -> Self {
        Mem {
            bytes: LIVE_BYTES.load(Ordering::Relaxed),
            allocations: ALLOCATIONS.load(Ordering::Relaxed),
        }
    }

    /// Live bytes and allocations per entry since `self`.
    fn per_entry(self, n: usize) -> (f64, f64) {
        let now = Mem::now();
        (
            (now.bytes - self.bytes) as f64 / n as f64,
            (now.allocations - self.allocations) as f64 / n as f64,
        )
    }

    /// Live bytes since `self`.
    fn retained(self) -> isize {
        Mem::now().bytes - self.bytes
    }
}

const TASKS: usize = 100_000;
/// The pushback of every task: `Retry-After: 1`.
const DELAY: Duration = Duration::from_secs(1);
/// The policy's jitter bound (the default, set explicitly): a retry is due
/// by `now + DELAY + JITTER`.
const JITTER: Duration = Duration::from_millis(250);

fn planner() -> Planner {
    Planner::new(Policy::default().jitter(JITTER)).expect("default policy is valid")
}

/// A 36-character key, shaped like a UUID idempotency key.
fn idempotency_key(i: usize) -> String {
    format!("6f1c2a9e-0b7d-4c3e-9a51-{i:012x}")
}

/// The lease key the middleware stores: `"{origin} {idempotency key}"`.
fn lease_key(i: usize) -> String {
    format!("https://api.example.com:443 {}", idempotency_key(i))
}

/// Runs 100k keyed tasks through a `KeyedPlanner`, all in flight at once:
/// begin, claim, pushback, claim the retry, end. Returns live bytes and
/// allocations per entry while all are running, and the bytes it still
/// holds once every task has ended.
fn keyed_run<K: std::hash::Hash + Eq>(
    label: &str,
    keys: &[K],
    make: impl Fn(&K) -> K,
) -> ((f64, f64), isize) {
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(30);
    let pushback = Pushback::new(Hint::Delay(DELAY), SystemTime::now());
    let retry_at = t0 + DELAY + JITTER;

    let planner = planner();
    let before = Mem::now();
    let mut tasks = KeyedPlanner::new(planner);
    for k in keys {
        tasks.begin(make(k), deadline).expect("fresh key");
    }
    let per_entry = before.per_entry(keys.len());
    assert_eq!(tasks.len(), keys.len());
    for k in keys {
        assert!(tasks.claim(k, t0).expect("running").is_send());
    }
    for k in keys {
        let decision = tasks.plan(k, &pushback, t0, 0).expect("running");
        assert!(matches!(decision, Decision::Wait { .. }), "{decision:?}");
    }
    for k in keys {
        let claim = tasks.claim(k, retry_at).expect("running");
        assert_eq!(claim, Claim::Send { attempt: 2 });
    }
    for k in keys {
        assert!(tasks.end(k).is_some());
    }
    let retained = before.retained();
    println!(
        "keyed run ({label} keys): {} tasks begun, claimed, pushed back, claimed again, ended; len() = {}",
        keys.len(),
        tasks.len()
    );
    assert_eq!(tasks.len(), 0);
    assert!(tasks.is_empty());
    drop(tasks);
    (per_entry, retained)
}

/// Acquires 100k leases on a `MemoryStore`, then releases them all.
/// Returns live bytes and allocations per lease while all are held, and
/// the bytes the store still holds once they are released.
fn store_run(keys: &[String]) -> ((f64, f64), isize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let ttl = Duration::from_secs(30);
    rt.block_on(async {
        let mut tokens = Vec::with_capacity(keys.len());
        let store = MemoryStore::new();
        let before = Mem::now();
        for k in keys {
            let token = store.acquire(k, ttl).await.expect("memory store");
            tokens.push(token.expect("fresh key"));
        }
        let per_entry = before.per_entry(keys.len());
        assert_eq!(store.active_keys(), keys.len());
        for (k, token) in keys.iter().zip(&tokens) {
            let _ = store.release(k, *token).await;
        }
        let retained = before.retained();
        assert_eq!(store.active_keys(), 0);
        assert!(store.no_active_keys());
        println!(
            "store run: {} leases acquired and released, len() = {}",
            keys.len(),
            store.active_keys()
        );
        (per_entry, retained)
    })
}

/// One decision's inputs: a task whose first send was claimed at `t0`, a
/// pushback for it, and the instant its retry is claimed.
struct Decide {
    planner: Planner,
    t0: Instant,
    task: TaskState,
    pushback: Pushback,
    retry_at: Instant,
}

fn decide() -> Decide {
    let planner = planner();
    let t0 = Instant::now();
    let mut task = TaskState::new(t0 + Duration::from_secs(30));
    assert!(planner.claim(&mut task, t0).is_send());
    Decide {
        planner,
        t0,
        task,
        pushback: Pushback::new(Hint::Delay(DELAY), SystemTime::now()),
        retry_at: t0 + DELAY + JITTER,
    }
}

/// Plan + claim pairs per second on this thread, best of `runs`.
fn decisions_per_sec(n: u64, runs: usize) -> f64 {
    let Decide {
        planner,
        t0,
        task,
        pushback,
        retry_at,
    } = decide();
    let mut check = task;
    let decision = planner.plan(&mut check, &pushback, t0, u64::MAX);
    assert!(matches!(decision, Decision::Wait { .. }), "{decision:?}");
    assert_eq!(
        planner.claim(&mut check, retry_at),
        Claim::Send { attempt: 2 }
    );
    (0..runs)
        .map(|_| {
            let start = std::time::Instant::now();
            let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
            for _ in 0..n {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let mut t = black_box(task);
                let decision = planner.plan(&mut t, black_box(&pushback), t0, seed);
                let claim = planner.claim(&mut t, black_box(retry_at));
                black_box(&decision);
                black_box(&claim);
            }
            n as f64 / start.elapsed().as_secs_f64()
        })
        .fold(0.0, f64::max)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then every part runs briefly.
    let full = std::env::args().any(|a| a == "--bench");

    // Memory first, while no other thread allocates.
    println!(
        "size_of::<TaskState>() = {} B",
        std::mem::size_of::<TaskState>()
    );
    let u64_keys: Vec<u64> = (0..TASKS as u64).collect();
    let ((bytes, allocs), retained) = keyed_run("u64", &u64_keys, |k| *k);
    println!(
        "KeyedPlanner<u64>: {bytes:.1} B/entry ({allocs:.2} allocations/entry) with {TASKS} tasks in flight; {retained} B still held after all ended"
    );
    let string_keys: Vec<String> = (0..TASKS).map(idempotency_key).collect();
    let ((bytes, allocs), retained) = keyed_run("String", &string_keys, Clone::clone);
    println!(
        "KeyedPlanner<String>: {bytes:.1} B/entry ({allocs:.2} allocations/entry, {}-byte keys) with {TASKS} tasks in flight; {retained} B still held after all ended",
        string_keys[0].len()
    );
    drop(string_keys);
    let lease_keys: Vec<String> = (0..TASKS).map(lease_key).collect();
    let ((bytes, allocs), retained) = store_run(&lease_keys);
    println!(
        "MemoryStore leases: {bytes:.1} B/entry ({allocs:.2} allocations/entry, {}-byte keys) with {TASKS} leases held; {retained} B still held after release",
        lease_keys[0].len()
    );
    drop(lease_keys);

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    {
        let Decide {
            planner,
            t0,
            task,
            pushback,
            retry_at,
        } = decide();
        let mut group = criterion.benchmark_group("planner");
        group.throughput(Throughput::Elements(1));
        group.bench_function("plan+claim", |b| {
            let mut seed = 1_u64;
            b.iter(|| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let mut t = black_box(task);
                let decision = planner.plan(&mut t, black_box(&pushback), t0, seed);
                (decision, planner.claim(&mut t, black_box(retry_at)))
            });
        });
        group.finish();
    }
    criterion.final_summary();

    let (n, runs) = if full { (10_000_000, 5) } else { (100_000, 1) };
    let rate = decisions_per_sec(n, runs);
    println!(
        "planner: {:.1} M decisions/s on one core (one decision = plan on a pushback + claim of the retry; best of {runs} x {n}){}",
        rate / 1e6,
        if full {
            ""
        } else {
            " [test mode: not a measurement]"
        }
    );
}
