//! Two workers sharing backpressure state through Redis.
//!
//! ```text
//! redis-server --port 6379 --save ''          # any Redis will do
//! cargo run --example shared_redis --features redis
//! REDIS_URL=redis://10.0.0.5:6379/ cargo run --example shared_redis --features redis
//! ```
//!
//! Two clients, each with its own `RedisStore` (its own connection), stand
//! in for two worker processes. They call one local server that admits two
//! requests a second and answers the rest `429` with `Retry-After`. What one
//! worker learns (the origin's gate, a running task's key) holds the other.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest_backpressure::store::{FailMode, RedisStore};
use reqwest_backpressure::{IdempotencyKey, Policy, RetryAfterMiddleware, RetryReport};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use tokio::time::Instant;
use wiremock::matchers::{any, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Admits `CAP` requests per one-second window; the rest get `429` with a
/// whole-second `Retry-After` reaching the next window.
struct RateLimited {
    start: Instant,
    /// (window, admitted in it)
    window: Mutex<(u64, u32)>,
}

const CAP: u32 = 2;

impl Respond for RateLimited {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let elapsed = self.start.elapsed();
        let mut w = self.window.lock().unwrap();
        if w.0 != elapsed.as_secs() {
            *w = (elapsed.as_secs(), 0);
        }
        if w.1 < CAP {
            w.1 += 1;
            return ResponseTemplate::new(200).set_delay(Duration::from_millis(50));
        }
        let next = Duration::from_secs(elapsed.as_secs() + 1) - elapsed;
        let secs = next.as_secs_f64().ceil().max(1.0);
        ResponseTemplate::new(429).insert_header("retry-after", format!("{secs}"))
    }
}

/// A worker's client: the middleware over its own `RedisStore`.
async fn worker(url: &str, prefix: &str) -> Result<ClientWithMiddleware, String> {
    let store = RedisStore::connect(url)
        .await
        .map_err(|e| e.to_string())?
        // Workers that should share state use the same prefix.
        .prefix(prefix)
        // The default is `Open` (go on with local state, with a warning).
        // `Closed` here, so that everything printed below went through Redis.
        .fail_mode(FailMode::Closed);
    let policy = Policy::default().jitter(Duration::from_millis(50));
    Ok(ClientBuilder::new(reqwest::Client::new())
        .with(RetryAfterMiddleware::with_store(policy, store))
        .build())
}

fn describe(result: &reqwest_middleware::Result<reqwest::Response>) -> String {
    match result {
        Ok(r) => {
            let report = r.extensions().get::<RetryReport>().expect("always set");
            format!(
                "{} after {} attempt(s), waited {} ms",
                r.status(),
                report.attempts(),
                report.waited().as_millis()
            )
        }
        Err(reqwest_middleware::Error::Middleware(e)) => {
            match e.downcast_ref::<reqwest_backpressure::Error>() {
                Some(e) => format!("refused, nothing sent: {}", e.code()),
                None => format!("error: {e}"),
            }
        }
        Err(e) => format!("error: {e}"),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    // One prefix per run, so runs never see each other's state.
    let prefix = format!("shared-redis-example:{}:", std::process::id());
    let (a, b) = match (worker(&url, &prefix).await, worker(&url, &prefix).await) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("cannot reach Redis at {url} ({e}).");
            eprintln!("Start one with:  redis-server --port 6379 --save ''");
            eprintln!("or point REDIS_URL at yours (redis://host:port/db).");
            return ExitCode::FAILURE;
        }
    };

    let server = MockServer::start().await;
    let start = Instant::now();
    Mock::given(any())
        .respond_with(RateLimited {
            start,
            window: Mutex::new((0, 0)),
        })
        .mount(&server)
        .await;
    let base = server.uri();
    let log = Arc::new(move |who: &str, what: String| {
        println!("{:>6} ms  {who}: {what}", start.elapsed().as_millis());
    });

    // 1. Worker A sends three reports at once: two are admitted, one gets a
    //    429, and its Retry-After closes the origin's gate in Redis.
    let burst: Vec<_> = (1..=3)
        .map(|i| {
            let req = a.get(format!("{base}/reports/{i}"));
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let r = req.send().await;
                log("worker A", format!("report {i}: {}", describe(&r)));
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(150)).await;

    // 2. Worker B, another store, has never been pushed back itself, yet it
    //    waits at the gate A learned instead of adding to the burst: one
    //    attempt, sent when the gate opens.
    let r = b.get(format!("{base}/reports/4")).send().await;
    log(
        "worker B",
        format!("report 4, held by A's gate: {}", describe(&r)),
    );
    for t in burst {
        t.await.expect("task");
    }

    // 3. One keyed task at a time across all workers: A's invoice is pushed
    //    back (Retry-After: 1) and waits holding its key; B's attempt with
    //    the same key is refused without sending anything.
    Mock::given(path("/invoices"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    let held = {
        let req = a
            .post(format!("{base}/invoices"))
            .with_extension(IdempotencyKey::new("invoice-7"));
        let log = Arc::clone(&log);
        tokio::spawn(async move {
            let r = req.send().await;
            log("worker A", format!("invoice-7: {}", describe(&r)));
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = b
        .post(format!("{base}/invoices"))
        .with_extension(IdempotencyKey::new("invoice-7"))
        .send()
        .await;
    log(
        "worker B",
        format!("invoice-7 while A holds it: {}", describe(&r)),
    );
    held.await.expect("task");
    ExitCode::SUCCESS
}
