//! Reliability under volume and faults: key contention (one client, and
//! four processes sharing a `RedisStore`), Redis faults in the middle of a
//! storm, and a memory soak.
//!
//! Each file has a short test that `cargo test` runs (seconds, asserting the
//! invariants) and an `#[ignore]`d full run printing one result line per run:
//!
//! ```sh
//! cargo test --release --all-features --test all reliability -- --ignored --nocapture --test-threads=1
//! ```
//!
//! Every figure is taken on the server's side ([`crate::server`], holding
//! each request [`HOLD`] so that two requests of one key in flight at once
//! are seen): *duplicates* are requests that arrived while another with the
//! same `Idempotency-Key` was still held; *premature* sends are sends of a
//! task before the time its own last `429` gave; *lease overlaps* are two
//! tasks of one key whose sends interleave (one sent while the other was
//! between its `429` and its retry), which a shared lease forbids.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest_middleware::ClientWithMiddleware;
use tokio::sync::Semaphore;

use crate::server::{KeyedArrival, ServerState};

#[cfg(feature = "redis")]
mod cluster_faults;
mod contention;
#[cfg(feature = "redis")]
mod redis_faults;
mod soak;

/// How long the server holds each request before answering.
pub(super) const HOLD: Duration = Duration::from_millis(5);

/// The size of a storm against a store's fault (one Redis, or a cluster).
#[cfg(feature = "redis")]
pub(super) struct Storm {
    pub(super) tasks: usize,
    pub(super) keys: usize,
    pub(super) concurrency: usize,
    pub(super) spacing: Duration,
    pub(super) cap: u32,
    /// When the fault starts, from the storm's start.
    pub(super) fault_at: Duration,
}

#[cfg(feature = "redis")]
impl Storm {
    /// What a storm labelled `label` broke of what every fault and fail
    /// mode must keep: no panic, some success, no early send, and an end
    /// within 10 s of its last start and of the fault's end (`started`: the
    /// storm's start, `ended`: the fault's end): a fault of a few seconds
    /// must not hold tasks for much longer.
    pub(super) fn broken(
        &self,
        label: &str,
        tally: &Tally,
        seen: &Seen,
        started: Instant,
        ended: Instant,
    ) -> Vec<String> {
        let mut broken = Vec::new();
        if tally.panics > 0 {
            broken.push(format!("{label}: {} panics", tally.panics));
        }
        if tally.ok == 0 {
            broken.push(format!("{label}: nothing succeeded"));
        }
        if seen.premature > 0 {
            broken.push(format!("{label}: {} premature sends", seen.premature));
        }
        let launched = self.spacing * u32::try_from(self.tasks).expect("tasks");
        let bound = launched.max(ended - started) + Duration::from_secs(10);
        if tally.elapsed > bound {
            broken.push(format!(
                "{label}: the storm took {:.1} s (bound {:.1} s); stopped: {:?}",
                tally.elapsed.as_secs_f64(),
                bound.as_secs_f64(),
                tally.stopped
            ));
        }
        broken
    }
}

/// How a run of tasks ended, as the callers saw it.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) tasks: usize,
    /// Answered `200`.
    pub(super) ok: usize,
    /// Refused at once: the key was held by another task.
    pub(super) already_active: usize,
    /// Ended with another response (a `429` the task stopped on), by stop
    /// code.
    pub(super) stopped: BTreeMap<String, usize>,
    /// Ended with another error, by code.
    pub(super) errors: BTreeMap<String, usize>,
    pub(super) panics: usize,
    pub(super) elapsed: Duration,
}

impl Tally {
    pub(super) fn add(&mut self, other: &Tally) {
        self.tasks += other.tasks;
        self.ok += other.ok;
        self.already_active += other.already_active;
        for (k, v) in &other.stopped {
            *self.stopped.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        self.panics += other.panics;
        self.elapsed = self.elapsed.max(other.elapsed);
    }

    /// Tasks that ended otherwise than with a response or `already_active`.
    pub(super) fn failed(&self) -> usize {
        self.errors.values().sum::<usize>() + self.panics
    }

    pub(super) fn per_second(&self) -> f64 {
        self.tasks as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// `ok=… already_active=… stopped={…} errors={…} panics=…`, also the
    /// line a worker process prints (after `TALLY `) and
    /// [`parse`](Self::parse) reads back.
    pub(super) fn line(&self) -> String {
        let map = |m: &BTreeMap<String, usize>| {
            m.iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "tasks={} ok={} already_active={} stopped={{{}}} errors={{{}}} panics={} ms={}",
            self.tasks,
            self.ok,
            self.already_active,
            map(&self.stopped),
            map(&self.errors),
            self.panics,
            self.elapsed.as_millis()
        )
    }

    pub(super) fn parse(line: &str) -> Option<Tally> {
        let mut t = Tally::default();
        let map = |v: &str| -> Option<BTreeMap<String, usize>> {
            let inner = v.strip_prefix('{')?.strip_suffix('}')?;
            inner
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|kv| {
                    let (k, v) = kv.rsplit_once(':')?;
                    Some((k.to_owned(), v.parse().ok()?))
                })
                .collect()
        };
        for field in line.split(' ') {
            let (name, value) = field.split_once('=')?;
            match name {
                "tasks" => t.tasks = value.parse().ok()?,
                "ok" => t.ok = value.parse().ok()?,
                "already_active" => t.already_active = value.parse().ok()?,
                "stopped" => t.stopped = map(value)?,
                "errors" => t.errors = map(value)?,
                "panics" => t.panics = value.parse().ok()?,
                "ms" => t.elapsed = Duration::from_millis(value.parse().ok()?),
                _ => {}
            }
        }
        Some(t)
    }
}

/// A run of keyed tasks: task `i` (sent as `x-task: first_task + i`) uses
/// client `i % clients.len()` and one of `keys` keys (seeded), starts no
/// earlier than `i * spacing`, and at most `concurrency` run at once.
pub(super) struct Run {
    pub(super) first_task: u32,
    pub(super) tasks: usize,
    pub(super) keys: usize,
    pub(super) concurrency: usize,
    pub(super) spacing: Duration,
    pub(super) seed: u64,
}

impl Run {
    pub(super) async fn go(&self, clients: &[ClientWithMiddleware], url: &str) -> Tally {
        let started = Instant::now();
        let gate = Arc::new(Semaphore::new(self.concurrency));
        let mut rng = fastrand::Rng::with_seed(self.seed);
        let mut handles = Vec::with_capacity(self.tasks);
        for i in 0..self.tasks {
            let client = clients[i % clients.len()].clone();
            let key = format!("key-{}", rng.usize(..self.keys));
            let task = self.first_task + u32::try_from(i).expect("task id");
            let start = tokio::time::Instant::now() + self.spacing * u32::try_from(i).unwrap_or(0);
            let gate = Arc::clone(&gate);
            let url = url.to_owned();
            handles.push(tokio::spawn(async move {
                tokio::time::sleep_until(start).await;
                let _permit = gate.acquire_owned().await.expect("semaphore");
                client
                    .post(url)
                    .header("x-task", task.to_string())
                    .with_extension(reqwest_backpressure::IdempotencyKey::new(key))
                    .body("payload")
                    .send()
                    .await
            }));
        }
        let mut tally = Tally {
            tasks: self.tasks,
            ..Tally::default()
        };
        for h in handles {
            match h.await {
                Err(e) => {
                    assert!(e.is_panic(), "task cancelled: {e}");
                    tally.panics += 1;
                }
                Ok(Ok(r)) if r.status() == 200 => tally.ok += 1,
                Ok(Ok(r)) => {
                    let code = r
                        .extensions()
                        .get::<reqwest_backpressure::RetryReport>()
                        .and_then(|rep| rep.stop_reason())
                        .map_or("none", |s| s.code());
                    *tally
                        .stopped
                        .entry(format!("{}/{code}", r.status().as_u16()))
                        .or_default() += 1;
                }
                Ok(Err(e)) => {
                    let code = error_code(&e);
                    if code == "already_active" {
                        tally.already_active += 1;
                    } else {
                        *tally.errors.entry(code).or_default() += 1;
                    }
                }
            }
        }
        tally.elapsed = started.elapsed();
        tally
    }
}

/// The crate's error code, or `reqwest` / `other` for errors not ours.
pub(super) fn error_code(e: &reqwest_middleware::Error) -> String {
    match e {
        reqwest_middleware::Error::Middleware(e) => e
            .downcast_ref::<reqwest_backpressure::Error>()
            .map_or_else(|| "other".to_owned(), |e| e.code().to_owned()),
        reqwest_middleware::Error::Reqwest(_) => "reqwest".to_owned(),
    }
}

/// Two tasks of one key whose sends interleave: task B sent while task A of
/// the same key had sent and was still to send again (or was held). Counted
/// from the server's log of keyed requests; `hold` is how long each request
/// was held. Returns when each overlapping task first sent.
pub(super) fn lease_overlaps(keyed: &[KeyedArrival], hold: Duration) -> Vec<Instant> {
    // Per task: its key and [first arrival, last arrival + hold].
    let mut spans: HashMap<u32, (&str, Instant, Instant)> = HashMap::new();
    for a in keyed {
        let Some(task) = a.task else { continue };
        let e = spans.entry(task).or_insert((a.key.as_str(), a.at, a.at));
        e.1 = e.1.min(a.at);
        e.2 = e.2.max(a.at);
    }
    let mut by_key: HashMap<&str, Vec<(Instant, Instant)>> = HashMap::new();
    for (key, first, last) in spans.into_values() {
        by_key.entry(key).or_default().push((first, last + hold));
    }
    let mut overlaps = Vec::new();
    for spans in by_key.values_mut() {
        spans.sort();
        let mut end: Option<Instant> = None;
        for &(start, stop) in spans.iter() {
            if end.is_some_and(|e| start < e) {
                overlaps.push(start);
            }
            end = Some(end.map_or(stop, |e| e.max(stop)));
        }
    }
    overlaps.sort();
    overlaps
}

/// When each duplicate arrived: a keyed request arriving less than `hold`
/// after the one before it with the same key (the live count is
/// [`ServerState::duplicates`]; this is the same, with times).
pub(super) fn duplicate_times(keyed: &[KeyedArrival], hold: Duration) -> Vec<Instant> {
    let mut busy: HashMap<&str, Instant> = HashMap::new();
    let mut times = Vec::new();
    for a in keyed {
        let until = busy.entry(a.key.as_str()).or_insert(a.at);
        if a.at < *until {
            times.push(a.at);
        }
        *until = (*until).max(a.at + hold);
    }
    times
}

/// What the server measured.
#[derive(Debug)]
#[cfg_attr(not(feature = "redis"), allow(dead_code))] // read by the Redis fault tests
pub(super) struct Seen {
    pub(super) requests: u64,
    pub(super) rejected: u64,
    pub(super) duplicates: u64,
    /// Keys with at least one duplicate, and the most duplicates of one key.
    pub(super) duplicate_keys: usize,
    pub(super) max_per_key: u64,
    pub(super) premature: u64,
    pub(super) lease_overlaps: usize,
    /// When duplicates and lease overlaps happened (from the log).
    pub(super) duplicate_at: Vec<Instant>,
    pub(super) overlap_at: Vec<Instant>,
}

impl Seen {
    pub(super) fn of(s: &ServerState) -> Seen {
        Seen {
            requests: s.requests,
            rejected: s.rejected,
            duplicates: s.duplicates,
            duplicate_keys: s.duplicate_keys.len(),
            max_per_key: s.duplicate_keys.values().copied().max().unwrap_or(0),
            premature: s.premature,
            lease_overlaps: lease_overlaps(&s.keyed, s.hold).len(),
            duplicate_at: duplicate_times(&s.keyed, s.hold),
            overlap_at: lease_overlaps(&s.keyed, s.hold),
        }
    }
}

/// This process's resident set (`VmRSS` in `/proc/self/status`), in KiB;
/// `None` where there is no `/proc`.
pub(super) fn vm_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
