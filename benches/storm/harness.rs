//! Running a row: N tasks, each sending one GET until it gets an answer,
//! against a fresh server with a fresh client.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest_backpressure::{Deadline, RetryReport};
use reqwest_middleware::ClientWithMiddleware;

use crate::config::{ClientKind, Config};
use crate::outcome::{ClientSide, Row, failure_label};
use crate::server::{LimitedServer, Shape, lock};

/// Runs tasks `ids` (each sends one GET with its id in `x-task`, and a
/// [`Deadline`] `deadline` after its start if given) with `client` and
/// returns what they got, their times counted from `started`, and the limit
/// if they had not all finished within `timeout` (then the rest were
/// aborted).
pub(crate) async fn run_tasks(
    client: &ClientWithMiddleware,
    url: &str,
    ids: std::ops::Range<u32>,
    started: Instant,
    timeout: Duration,
    deadline: Option<Duration>,
) -> (ClientSide, Option<Duration>) {
    let side = Arc::new(Mutex::new(ClientSide::default()));
    let mut set = tokio::task::JoinSet::new();
    for i in ids {
        let client = client.clone();
        let url = url.to_owned();
        let side = side.clone();
        set.spawn(async move { run_task(&client, &url, i, started, deadline, &side).await });
    }
    let all_done = async {
        while let Some(joined) = set.join_next().await {
            if let Err(e) = joined {
                let mut side = lock(&side);
                side.failed += 1;
                *side
                    .reasons
                    .entry(format!("task panicked: {e}"))
                    .or_default() += 1;
            }
        }
    };
    let timed_out = tokio::time::timeout(timeout, all_done)
        .await
        .is_err()
        .then_some(timeout);
    set.abort_all();
    while set.join_next().await.is_some() {}
    let client_side = std::mem::take(&mut *lock(&side));
    (client_side, timed_out)
}

/// Task `i`: one GET with its id in `x-task`; records how it ended in `side`.
async fn run_task(
    client: &ClientWithMiddleware,
    url: &str,
    i: u32,
    started: Instant,
    deadline: Option<Duration>,
    side: &Mutex<ClientSide>,
) {
    let mut request = client.get(url).header("x-task", i.to_string());
    if let Some(d) = deadline {
        request = request.with_extension(Deadline::after(d));
    }
    let result = request.send().await;
    let ok = matches!(&result, Ok(r) if r.status() == reqwest::StatusCode::OK);
    let label = (!ok).then(|| failure_label(&result));
    let attempts = result
        .as_ref()
        .ok()
        .and_then(|r| r.extensions().get::<RetryReport>())
        .map(RetryReport::attempts);
    if let Ok(r) = result {
        // Read the body so the connection goes back to the pool.
        let _ = r.bytes().await;
    }
    let at = started.elapsed();
    let mut side = lock(side);
    match label {
        None => {
            side.ok += 1;
            side.last_ok = Some(side.last_ok.map_or(at, |l| l.max(at)));
            if let Some(a) = attempts {
                *side.attempts.entry(a).or_default() += 1;
            }
        }
        Some(label) => {
            side.failed += 1;
            side.failed_at(at);
            *side.reasons.entry(label).or_default() += 1;
        }
    }
}

/// One single-process row: `kind`'s client against a fresh `shape` server.
pub(crate) async fn run_row(cfg: &Config, shape: Shape, kind: ClientKind) -> Row {
    let server = LimitedServer::start(shape, cfg.cap, "/work").await;
    let client = kind.client(&server.url, cfg.declared(shape, cfg.cap));
    let started = Instant::now();
    let (client_side, timed_out) = run_tasks(
        &client,
        &server.url,
        0..cfg.n,
        started,
        cfg.row_timeout(shape),
        Config::task_deadline(shape),
    )
    .await;
    let server = server.finish();
    Row {
        shape,
        client: kind,
        n: cfg.n,
        epoch_offset: server.epoch.map(|e| e.saturating_duration_since(started)),
        client_side,
        server,
        timed_out,
        notes: Vec::new(),
    }
}
