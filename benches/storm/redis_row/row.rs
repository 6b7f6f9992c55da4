//! The Redis row in the parent process: the rate-limited server here, the
//! tasks in [`WORKERS`] worker processes sharing one `redis-server`.

use std::io::Read;
use std::ops::Range;
use std::process::ExitStatus;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::wire::{Report, decode};
use super::worker::Worker;
use super::{GRACE, LATE, START_DELAY, WORKERS, millis};
use crate::config::{ClientKind, Config};
use crate::outcome::{ClientSide, Row};
use crate::redis_server::Workers;
use crate::report::secs;
use crate::server::{LimitedServer, Shape};

/// A worker's stdout and stderr, read to the end on their own threads.
type Pipes = (Option<JoinHandle<String>>, Option<JoinHandle<String>>);

/// The worker processes started, with their pipes and task ranges.
struct Spawned {
    workers: Workers,
    pipes: Vec<Pipes>,
    ranges: Vec<Range<u32>>,
}

/// What the row gathered from its workers.
#[derive(Default)]
struct Gathered {
    side: ClientSide,
    notes: Vec<String>,
    unfinished: u32,
}

/// The row: the rate-limited server here, the tasks in [`WORKERS`]
/// processes sharing `redis_url`.
pub(crate) async fn run(cfg: &Config, shape: Shape, redis_url: &str) -> Row {
    let server = LimitedServer::start(shape, cfg.cap, "/work").await;
    let prefix = key_prefix(shape);
    let (start_ms, started) = shared_start();
    let mut all = Gathered::default();
    let mut spawned = Spawned {
        workers: Workers(Vec::new()),
        pipes: Vec::new(),
        ranges: Vec::new(),
    };
    match std::env::current_exe() {
        Err(e) => {
            all.side.failed = cfg.n;
            all.side
                .reasons
                .insert(format!("cannot re-run this binary: {e}"), cfg.n);
        }
        Ok(exe) => {
            for w in 0..WORKERS {
                let worker = Worker {
                    id: w,
                    server_url: server.url.clone(),
                    redis_url: redis_url.to_owned(),
                    prefix: prefix.clone(),
                    tasks: cfg.n * w / WORKERS..cfg.n * (w + 1) / WORKERS,
                    start_ms,
                    timeout: cfg.row_timeout(shape),
                    deadline: Config::task_deadline(shape),
                    quota: cfg.declared(shape, cfg.cap),
                };
                spawn(&worker, &exe, &mut spawned, &mut all.side);
            }
        }
    }
    // Wait for them (the server answers on this runtime meanwhile).
    let limit = cfg.row_timeout(shape);
    let (statuses, killed) = wait(&mut spawned.workers, started + limit + GRACE).await;
    drop(spawned.workers);
    for (w, ((out, err), range)) in spawned.pipes.into_iter().zip(spawned.ranges).enumerate() {
        let out = out.and_then(|h| h.join().ok()).unwrap_or_default();
        let err = err.and_then(|h| h.join().ok()).unwrap_or_default();
        let status = statuses.get(w).copied().flatten();
        match decode(&out) {
            Some(r) => merge(&mut all, w, &range, r),
            None => missing(&mut all, w, &range, status, &err),
        }
    }
    let server = server.finish();
    Row {
        shape,
        client: ClientKind::BackpressureRedis,
        n: cfg.n,
        epoch_offset: server.epoch.map(|e| e.saturating_duration_since(started)),
        client_side: all.side,
        server,
        timed_out: (killed || all.unfinished > 0).then_some(limit),
        notes: all.notes,
    }
}

/// A key prefix of this process, shape and moment: rows never share keys.
fn key_prefix(shape: Shape) -> String {
    format!(
        "storm-{}-{}-{}:",
        std::process::id(),
        match shape {
            Shape::Window => "window",
            Shape::Bucket => "bucket",
            Shape::RateLimitHeaders => "ratelimit",
            Shape::ExpressRateLimit => "express",
            Shape::TruncatedZero => "truncated",
            Shape::Spells => "spells",
            Shape::SlidingLog => "sliding",
            Shape::Gcra => "gcra",
            Shape::Leaky(d) => match d.status() {
                429 => "leaky429",
                _ => "leaky503",
            },
            Shape::Counting(d) => match d.status() {
                429 => "counting429",
                _ => "counting503",
            },
            Shape::Outage { .. } => "outage",
        },
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    )
}

/// The shared start instant, as wall-clock milliseconds for the workers and
/// on this process's monotonic clock.
fn shared_start() -> (u64, Instant) {
    let (now_wall, now) = (SystemTime::now(), Instant::now());
    let start_ms = millis(
        (now_wall + START_DELAY)
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default(),
    ) + 1;
    let start_wall = UNIX_EPOCH + Duration::from_millis(start_ms);
    let started = now + start_wall.duration_since(now_wall).unwrap_or_default();
    (start_ms, started)
}

fn read_on_thread(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    })
}

/// Starts `worker` as a child of `exe`; if it cannot, its tasks fail.
fn spawn(worker: &Worker, exe: &std::path::Path, spawned: &mut Spawned, side: &mut ClientSide) {
    let range = worker.tasks.clone();
    match worker.command(exe).spawn() {
        Ok(mut child) => {
            let out = child.stdout.take().map(read_on_thread);
            let err = child.stderr.take().map(read_on_thread);
            spawned.pipes.push((out, err));
            spawned.workers.0.push(child);
            spawned.ranges.push(range);
        }
        Err(e) => {
            let n = range.end - range.start;
            side.failed += n;
            *side
                .reasons
                .entry(format!("cannot start a worker process: {e}"))
                .or_default() += n;
        }
    }
}

/// Waits until every worker exited or `give_up`; returns their exit
/// statuses and whether one was still running then.
async fn wait(workers: &mut Workers, give_up: Instant) -> (Vec<Option<ExitStatus>>, bool) {
    let mut killed = false;
    let mut statuses: Vec<Option<ExitStatus>> = vec![None; workers.0.len()];
    while statuses.iter().any(Option::is_none) {
        for (status, child) in statuses.iter_mut().zip(&mut workers.0) {
            if status.is_none() {
                *status = child.try_wait().ok().flatten();
            }
        }
        if Instant::now() > give_up {
            killed = statuses.iter().any(Option::is_none);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (statuses, killed)
}

/// Adds worker `w`'s report to the row.
fn merge(all: &mut Gathered, w: usize, range: &Range<u32>, r: Report) {
    let side = &mut all.side;
    side.ok += r.side.ok;
    side.failed += r.side.failed;
    side.last_ok = side.last_ok.max(r.side.last_ok);
    for (k, v) in &r.side.reasons {
        *side.reasons.entry(k.clone()).or_default() += v;
    }
    for (k, v) in &r.side.attempts {
        *side.attempts.entry(*k).or_default() += v;
    }
    if let Some((lo, hi)) = r.side.failed_span {
        side.failed_at(lo);
        side.failed_at(hi);
    }
    all.unfinished += r.unfinished;
    all.notes.push(format!(
        "worker {w} (tasks {}..{}): {} ok, {} failed{}, {} unfinished, \
         last success {}, tasks started {:.1} ms after the shared instant",
        range.start,
        range.end,
        r.side.ok,
        r.side.failed,
        r.side
            .failed_span
            .map(|(lo, hi)| format!(" (at {}–{})", secs(lo), secs(hi)))
            .unwrap_or_default(),
        r.unfinished,
        r.side.last_ok.map_or_else(|| "—".to_owned(), secs),
        r.late.as_secs_f64() * 1e3
    ));
    if r.late > LATE {
        eprintln!(
            "storm: warning: worker {w} started its tasks {:.1} ms after the \
             shared start instant (start-up took over {} s)",
            r.late.as_secs_f64() * 1e3,
            START_DELAY.as_secs()
        );
    }
}

/// Worker `w` left no report: killed, crashed, or could not connect. Its
/// tasks count as failed (or unfinished if killed at the limit).
fn missing(
    all: &mut Gathered,
    w: usize,
    range: &Range<u32>,
    status: Option<ExitStatus>,
    err: &str,
) {
    let n = range.end - range.start;
    let what = match status {
        Some(s) => format!("worker process exited ({s}) without a result"),
        None => "worker process killed at the limit".to_owned(),
    };
    eprintln!("storm: worker {w}: {what}; its stderr:\n{err}");
    if status.is_some() {
        all.side.failed += n;
        let why = err.lines().last().unwrap_or("").trim();
        *all.side
            .reasons
            .entry(format!("{what}: {why}"))
            .or_default() += n;
    }
    all.notes.push(format!(
        "worker {w} (tasks {}..{}): {what}",
        range.start, range.end
    ));
}
