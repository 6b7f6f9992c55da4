//! One run: a seed's scenario on its own current-thread runtime under
//! tokio's paused clock, the crate's wall clock following it, every task
//! spawned at its arrival and dropped at its drawn cancellation; then
//! what each task ended with and what the store still holds. Each run has
//! a thread of its own, under a watchdog of real time (`watchdog.rs`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use reqwest_backpressure::origin::OriginStatus;
use reqwest_backpressure::store::Coalesced;
use reqwest_backpressure::{
    Cost, Deadline, Fallback, IdempotencyKey, Policy, Quota, RateLimitHeaders,
    RetryAfterMiddleware, RetryReport, Store,
};
use reqwest_middleware::ClientBuilder;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::draw::{Family, Method, Scenario, scenario};
use super::server::{Log, SimServer};
use super::store::FaultyStore;
use super::watchdog::{self, Stalled, watched};

/// How a task ended.
#[derive(Debug, Clone)]
pub(crate) enum Ending {
    Response {
        status: u16,
        attempts: u32,
        stop: Option<&'static str>,
    },
    Error {
        code: String,
        /// `Error::retry_at`, on the simulation's clock.
        retry_at: Option<Duration>,
    },
    Cancelled,
    Panicked,
}

/// When each task ended and how, by task; `None`: it never did.
pub(crate) type Endings = Vec<Option<(Duration, Ending)>>;

/// Everything a run leaves to check.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) scenario: Scenario,
    pub(crate) log: Log,
    /// When each task ended and how; `None`: it never did (a hang).
    pub(crate) ended: Endings,
    /// Each task's deadline on the simulation's clock.
    pub(crate) deadlines: Vec<Duration>,
    /// When the last task ended.
    pub(crate) last_end: Duration,
    /// Each origin's status once the last task ended.
    pub(crate) status: Vec<Option<OriginStatus>>,
    /// Keys whose lease could not be taken again.
    pub(crate) leases: usize,
    pub(crate) store_failures: u64,
}

/// The wall clock at the start of the run: a fixed day, and a fraction of
/// a second that the seed picks (epoch resets round at whole seconds).
fn wall_base(seed: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_millis(seed % 1000)
}

pub(crate) fn origin_of(url: &str) -> &str {
    url.trim_end_matches("/items")
}

/// The policy the scenario draws.
pub(crate) fn policy(sc: &Scenario) -> Policy {
    let p = &sc.policy;
    let headers = match sc.origins[0].family {
        Family::GitHub => RateLimitHeaders::github(),
        Family::OpenAi => RateLimitHeaders::openai(),
        Family::Discord => RateLimitHeaders::discord(),
        _ => RateLimitHeaders::ietf(),
    };
    let mut policy = Policy::default()
        .max_attempts(p.max_attempts)
        .max_wait(p.max_wait)
        .missing_retry_after(p.fallback.map_or(Fallback::Stop, Fallback::Delay))
        .jitter(p.jitter)
        .origin_gate(p.origin_gate)
        .pacing(p.pacing)
        .proactive_gate(p.proactive_gate)
        .first_contact(p.first_contact)
        .rate_limit_headers(headers);
    for q in &p.quotas {
        let mut quota = Quota::new(q.count, q.per);
        if q.refilled {
            quota = quota.refilled();
        }
        if q.units {
            quota = quota.units();
        }
        policy = policy.quota(origin_of(&sc.origins[q.origin].url), quota);
    }
    if let Some((o, n)) = p.in_flight {
        policy = policy.max_in_flight(origin_of(&sc.origins[o].url), n);
    }
    policy
}

/// Why a run gave no [`Run`].
#[derive(Debug, Clone)]
pub(crate) enum Failed {
    /// The run itself panicked: the panic's message.
    Panicked(String),
    /// It ran past the watchdog's limit of real time (see `watchdog.rs`).
    Stalled(Stalled),
}

/// Runs `seed` on a thread of its own, under the watchdog.
pub(crate) fn run(seed: u64) -> Result<Run, Failed> {
    let name = format!("sim-seed-{seed}");
    match watched(name, watchdog::limit(), move |told| run_here(seed, told)) {
        Ok(run) => run.map_err(Failed::Panicked),
        Err(stalled) => Err(Failed::Stalled(stalled)),
    }
}

/// Runs `seed` on this thread, until told to give up (`None`); `Err` with
/// the panic's message if the run itself panicked.
fn run_here(seed: u64, told: oneshot::Receiver<()>) -> Option<Result<Run, String>> {
    let sc = scenario(seed);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        fastrand::seed(seed);
        let run = runtime.block_on(async move {
            tokio::select! {
                biased;
                _ = told => None,
                run = run_on(seed, sc) => Some(run),
            }
        });
        reqwest_backpressure::__sim::stop_following();
        run
    }));
    match outcome {
        Ok(run) => run.map(Ok),
        Err(panic) => {
            reqwest_backpressure::__sim::stop_following();
            Some(Err(panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default()))
        }
    }
}

async fn run_on(seed: u64, sc: Scenario) -> Run {
    let base = wall_base(seed);
    reqwest_backpressure::__sim::follow_paused_clock(base);
    let start = Instant::now();
    let server = SimServer::new(&sc, seed, start, base);
    let faulty = FaultyStore::new(sc.store, seed);
    let memory = faulty.memory.clone();
    let ended = if sc.store.coalesced {
        tasks(
            &sc,
            server.clone(),
            Coalesced::new(faulty.clone()),
            (start, base),
        )
        .await
    } else if sc.store.is_clean() {
        tasks(&sc, server.clone(), memory.clone(), (start, base)).await
    } else {
        tasks(&sc, server.clone(), faulty.clone(), (start, base)).await
    };
    let last_end = ended
        .iter()
        .flatten()
        .map(|(at, _)| *at)
        .max()
        .unwrap_or_default();
    // What each origin holds once the last task ended (its detached work,
    // a store's round trips and a coalesced write, done).
    let settle = sc.store.latency.saturating_mul(4) + Duration::from_millis(150);
    tokio::time::sleep_until(start + last_end + settle).await;
    let mut status = Vec::new();
    for o in &sc.origins {
        let url = reqwest::Url::parse(&o.url).unwrap();
        status.push(memory.origin_status(&url).await.ok().flatten());
    }
    // A key whose lease is given back can be taken again.
    let mut keys: Vec<&String> = sc.tasks.iter().filter_map(|t| t.key.as_ref()).collect();
    keys.sort();
    keys.dedup();
    let mut leases = 0;
    for key in keys {
        match memory.acquire(key, Duration::from_millis(1)).await {
            Ok(Some(token)) => memory.release(key, token).await.unwrap_or_default(),
            _ => leases += 1,
        }
    }
    let deadlines = sc
        .tasks
        .iter()
        .map(|t| t.arrives + t.deadline.unwrap_or(Duration::from_secs(120)))
        .collect();
    let log = std::mem::take(&mut *server.log.lock().unwrap());
    let store_failures = *faulty.failed.lock().unwrap();
    Run {
        scenario: sc,
        log,
        ended,
        deadlines,
        last_end,
        status,
        leases,
        store_failures,
    }
}

/// Spawns every task against a client over `store`; how each ended.
async fn tasks<S: Store + Clone>(
    sc: &Scenario,
    server: SimServer,
    store: S,
    (start, base): (Instant, SystemTime),
) -> Endings {
    let middleware = RetryAfterMiddleware::with_store(policy(sc), store);
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(middleware)
        .with(server)
        .build();
    let ended: Arc<Mutex<Endings>> = Arc::new(Mutex::new(vec![None; sc.tasks.len()]));
    let mut handles = Vec::new();
    let mut bound = Duration::ZERO;
    for (i, t) in sc.tasks.iter().enumerate() {
        bound = bound.max(t.arrives + t.deadline.unwrap_or(Duration::from_secs(120)));
        let (client, ended, t) = (client.clone(), ended.clone(), t.clone());
        let url = sc.origins[t.origin].url.clone();
        handles.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + t.arrives).await;
            let method = match t.method {
                Method::Get => reqwest::Method::GET,
                Method::Post { .. } => reqwest::Method::POST,
            };
            let mut request = client
                .request(method, &url)
                .header("x-sim-task", i.to_string())
                .header("x-sim-cost", t.cost.to_string());
            if let Some(d) = t.deadline {
                request = request.with_extension(Deadline::at(start + t.arrives + d));
            }
            if let Some(key) = &t.key {
                request = request.with_extension(IdempotencyKey::new(key.clone()));
            }
            if t.cost > 0 {
                request = request.with_extension(Cost::new(t.cost));
            }
            let send = request.send();
            let result = match t.cancel_after {
                Some(after) => tokio::time::timeout(after, send).await.ok(),
                None => Some(send.await),
            };
            let ending = match result {
                None => Ending::Cancelled,
                Some(Ok(response)) => {
                    let report = response.extensions().get::<RetryReport>();
                    Ending::Response {
                        status: response.status().as_u16(),
                        attempts: report.map_or(0, RetryReport::attempts),
                        stop: report.and_then(|r| r.stop_reason()).map(|s| s.code()),
                    }
                }
                Some(Err(e)) => error_ending(&e, base),
            };
            ended.lock().unwrap()[i] = Some((start.elapsed(), ending));
        }));
    }
    let bound = start + bound + Duration::from_secs(30);
    for handle in handles {
        let abort = handle.abort_handle();
        match tokio::time::timeout_at(bound, handle).await {
            Ok(Err(e)) if e.is_panic() => {
                // Which task: the first without an ending.
                let mut ended = ended.lock().unwrap();
                if let Some(slot) = ended.iter_mut().find(|e| e.is_none()) {
                    *slot = Some((start.elapsed(), Ending::Panicked));
                }
            }
            Ok(_) => {}
            Err(_) => abort.abort(),
        }
    }
    ended.lock().unwrap().clone()
}

fn error_ending(e: &reqwest_middleware::Error, base: SystemTime) -> Ending {
    let (code, retry_at) = match e {
        reqwest_middleware::Error::Middleware(inner) => {
            match inner.downcast_ref::<reqwest_backpressure::Error>() {
                Some(ours) => {
                    // The crate's wall clock is `base` at the start.
                    let retry_at = ours
                        .retry_at()
                        .map(|at| at.duration_since(base).unwrap_or_default());
                    (ours.code().to_owned(), retry_at)
                }
                None if inner.to_string().contains("simulated transport") => {
                    ("transport".to_owned(), None)
                }
                None => (format!("other: {inner}"), None),
            }
        }
        reqwest_middleware::Error::Reqwest(e) => (format!("reqwest: {e}"), None),
    };
    Ending::Error { code, retry_at }
}
