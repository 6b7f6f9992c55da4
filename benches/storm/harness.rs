//! Running a row: N tasks, each sending one GET until it gets an answer,
//! against a fresh server with a fresh client; and any set of requests,
//! a task each ([`run_requests`]: the vendors' rows).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest_backpressure::{Deadline, RetryReport};
use reqwest_middleware::{ClientWithMiddleware, RequestBuilder};
use tokio::sync::Semaphore;

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
    let requests = ids.map(|i| {
        let request = client.get(url).header("x-task", i.to_string());
        match deadline {
            Some(d) => request.with_extension(Deadline::after(d)),
            None => request,
        }
    });
    run_requests(requests, started, timeout, None).await
}

/// Sends each of `requests`, a task each (at most `at_once` in flight if
/// given, the others waiting their turn in order), and returns what they
/// got (a success: a `200`), their times counted from `started`, and the
/// limit if they had not all finished within `timeout` (then the rest were
/// aborted).
pub(crate) async fn run_requests(
    requests: impl IntoIterator<Item = RequestBuilder>,
    started: Instant,
    timeout: Duration,
    at_once: Option<usize>,
) -> (ClientSide, Option<Duration>) {
    let side = Arc::new(Mutex::new(ClientSide::default()));
    let turns = at_once.map(|n| Arc::new(Semaphore::new(n)));
    let mut set = tokio::task::JoinSet::new();
    for request in requests {
        let (side, turns) = (side.clone(), turns.clone());
        set.spawn(async move {
            // Held until the answer is read: a turn in flight.
            let _turn = match turns {
                Some(turns) => Some(turns.acquire_owned().await),
                None => None,
            };
            run_request(request, started, &side).await;
        });
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

/// Sends `request`; records how it ended in `side`.
async fn run_request(request: RequestBuilder, started: Instant, side: &Mutex<ClientSide>) {
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
