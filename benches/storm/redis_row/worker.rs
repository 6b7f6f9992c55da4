//! A worker process of the Redis row: this binary re-run with
//! `STORM_WORKER=1` and its settings in `STORM_WORKER_*`. It runs its share of
//! the tasks from the shared start instant through a `RedisStore` and prints
//! one result line.

use std::ops::Range;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest_backpressure::store::{FailMode, RedisStore};
use reqwest_backpressure::{Policy, Quota, RetryAfterMiddleware};
use reqwest_middleware::ClientBuilder;

use super::millis;
use super::wire::encode;
use crate::declared::declare;
use crate::harness::run_tasks;

// Worker settings, passed in the environment. `STORM_WORKER=1` marks a
// worker process.
const ROLE: &str = "STORM_WORKER";
const ID: &str = "STORM_WORKER_ID";
const SERVER_URL: &str = "STORM_WORKER_SERVER_URL";
const REDIS_URL: &str = "STORM_WORKER_REDIS_URL";
const PREFIX: &str = "STORM_WORKER_PREFIX";
/// `first..end` task ids (`x-task`), unique across the workers.
const TASKS: &str = "STORM_WORKER_TASKS";
/// The shared start instant, milliseconds since the UNIX epoch.
const START_MS: &str = "STORM_WORKER_START_MS";
const TIMEOUT_MS: &str = "STORM_WORKER_TIMEOUT_MS";
/// Each task's `Deadline`, in ms after its start (absent: none).
const DEADLINE_MS: &str = "STORM_WORKER_DEADLINE_MS";
/// The quota declared for the server's origin (`STORM_DECLARE`), as
/// `count/per_ms`, `/refilled` after for a bucket (absent: none).
const QUOTA: &str = "STORM_WORKER_QUOTA";

/// One worker process's settings.
pub(crate) struct Worker {
    pub(super) id: u32,
    pub(super) server_url: String,
    pub(super) redis_url: String,
    pub(super) prefix: String,
    pub(super) tasks: Range<u32>,
    pub(super) start_ms: u64,
    pub(super) timeout: Duration,
    pub(super) deadline: Option<Duration>,
    /// The quota declared for the server's origin, if any.
    pub(super) quota: Option<Quota>,
}

/// `quota` as [`QUOTA`] carries it.
fn encode_quota(quota: Quota) -> String {
    format!(
        "{}/{}{}",
        quota.count(),
        millis(quota.per()),
        if quota.is_refilled() { "/refilled" } else { "" }
    )
}

/// [`QUOTA`]'s value read back.
fn decode_quota(s: &str) -> Option<Quota> {
    let mut parts = s.split('/');
    let count = parts.next()?.parse().ok()?;
    let per = Duration::from_millis(parts.next()?.parse().ok()?);
    let quota = Quota::new(count, per);
    match (parts.next(), parts.next()) {
        (None, _) => Some(quota),
        (Some("refilled"), None) => Some(quota.refilled()),
        _ => None,
    }
}

impl Worker {
    /// `None` unless this process is a worker.
    pub(crate) fn from_env() -> Option<Result<Self, String>> {
        std::env::var_os(ROLE)?;
        let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} not set"));
        let num = |name: &str| -> Result<u64, String> {
            var(name)?
                .parse()
                .map_err(|_| format!("{name} is not a number"))
        };
        let parse = || -> Result<Self, String> {
            let tasks = var(TASKS)?;
            let (first, end) = tasks
                .split_once("..")
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                .ok_or_else(|| format!("{TASKS}={tasks:?} is not first..end"))?;
            Ok(Worker {
                id: u32::try_from(num(ID)?).map_err(|_| format!("{ID} too large"))?,
                server_url: var(SERVER_URL)?,
                redis_url: var(REDIS_URL)?,
                prefix: var(PREFIX)?,
                tasks: first..end,
                start_ms: num(START_MS)?,
                timeout: Duration::from_millis(num(TIMEOUT_MS)?),
                deadline: match std::env::var_os(DEADLINE_MS) {
                    Some(_) => Some(Duration::from_millis(num(DEADLINE_MS)?)),
                    None => None,
                },
                quota: match std::env::var_os(QUOTA) {
                    Some(_) => {
                        let q = var(QUOTA)?;
                        Some(decode_quota(&q).ok_or_else(|| {
                            format!("{QUOTA}={q:?} is not count/per_ms[/refilled]")
                        })?)
                    }
                    None => None,
                },
            })
        };
        Some(parse())
    }

    pub(super) fn command(&self, exe: &std::path::Path) -> Command {
        let mut cmd = Command::new(exe);
        cmd.env(ROLE, "1")
            .env(ID, self.id.to_string())
            .env(SERVER_URL, &self.server_url)
            .env(REDIS_URL, &self.redis_url)
            .env(PREFIX, &self.prefix)
            .env(TASKS, format!("{}..{}", self.tasks.start, self.tasks.end))
            .env(START_MS, self.start_ms.to_string())
            .env(TIMEOUT_MS, millis(self.timeout).to_string())
            .env_remove(DEADLINE_MS)
            .env_remove(QUOTA)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(d) = self.deadline {
            cmd.env(DEADLINE_MS, millis(d).to_string());
        }
        if let Some(q) = self.quota {
            cmd.env(QUOTA, encode_quota(q));
        }
        cmd
    }

    /// The worker's `main`: runs its tasks from the shared start instant
    /// and prints one result line.
    pub(crate) fn run(self) -> ExitCode {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        runtime.block_on(async {
            let connected = match self.redis_url.strip_prefix("cluster:") {
                Some(seeds) => RedisStore::connect_cluster(seeds.split(',')).await,
                None => RedisStore::connect(&self.redis_url).await,
            };
            let store = match connected {
                Ok(store) => store
                    .prefix(self.prefix.as_str())
                    // A Redis problem shows up as failed tasks, never as
                    // a silently unshared run.
                    .fail_mode(FailMode::Closed),
                Err(e) => {
                    eprintln!("storm worker {}: cannot connect to Redis: {e}", self.id);
                    return ExitCode::from(2);
                }
            };
            let inner = reqwest::Client::builder()
                .build()
                .expect("reqwest client builds");
            let client = ClientBuilder::new(inner)
                .with(RetryAfterMiddleware::with_store(
                    declare(Policy::default(), &self.server_url, self.quota),
                    store,
                ))
                .build();
            let (started, late) = self.wait_for_start().await;
            let n = self.tasks.end.saturating_sub(self.tasks.start);
            // Tasks still running at the limit were aborted: unfinished.
            let (side, _) = run_tasks(
                &client,
                &self.server_url,
                self.tasks.clone(),
                started,
                self.timeout,
                self.deadline,
            )
            .await;
            let unfinished = n.saturating_sub(side.ok + side.failed);
            println!("{}", encode(&side, unfinished, late));
            ExitCode::SUCCESS
        })
    }

    /// Sleeps to just before the shared instant, then spins to it; returns
    /// that instant on this process's monotonic clock, and how late it was
    /// reached.
    async fn wait_for_start(&self) -> (Instant, Duration) {
        let start = UNIX_EPOCH + Duration::from_millis(self.start_ms);
        if let Ok(wait) = start.duration_since(SystemTime::now()) {
            tokio::time::sleep(wait.saturating_sub(Duration::from_millis(2))).await;
        }
        while SystemTime::now() < start {
            std::hint::spin_loop();
        }
        let late = SystemTime::now().duration_since(start).unwrap_or_default();
        // The shared instant on this process's monotonic clock.
        let started = Instant::now()
            .checked_sub(late)
            .unwrap_or_else(Instant::now);
        (started, late)
    }
}
