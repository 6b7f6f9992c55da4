//! `RedisStore` against a real `redis-server` on loopback, started by these
//! tests on a free port and killed when each test ends.
//!
//! A missing `redis-server` fails the tests (it never skips them). Timing
//! assertions are taken on the server's side (arrival times of requests);
//! lower bounds are exact, upper bounds loose. Every test is bounded by a
//! timeout, so a hung store fails instead of hanging the run.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use reqwest_backpressure::store::{FailMode, RedisStore};
use reqwest_backpressure::{
    Deadline, Fallback, IdempotencyKey, Policy, RetryAfterMiddleware, RetryReport, Store,
};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

// ------------------------------------------------------------ redis-server

#[path = "../support/redis_server.rs"]
mod redis_server;

use redis_server::{RedisServer, Workers};

/// Keys matching `pattern`, sorted.
fn keys(conn: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(conn).expect("KEYS");
    keys.sort();
    keys
}

fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).expect("PTTL")
}

// ---------------------------------------------------------------- helpers

/// Runs a test body under a hard time limit.
async fn bounded<F: Future<Output = ()>>(limit: Duration, body: F) {
    tokio::time::timeout(limit, body)
        .await
        .unwrap_or_else(|_| panic!("test did not finish within {limit:?}"));
}

async fn store(redis: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::connect(&redis.url())
        .await
        .expect("connect RedisStore")
        .prefix(prefix)
}

fn client(store: RedisStore, policy: Policy) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(RetryAfterMiddleware::try_with_store(policy, store).expect("valid policy"))
        .build()
}

fn policy() -> Policy {
    Policy::default().jitter(Duration::ZERO)
}

/// The crate's error code of a failed call (or a description of another
/// error).
fn code(result: &reqwest_middleware::Result<reqwest::Response>) -> String {
    match result {
        Ok(r) => format!("ok {}", r.status()),
        Err(reqwest_middleware::Error::Middleware(e)) => {
            e.downcast_ref::<reqwest_backpressure::Error>().map_or_else(
                || format!("other middleware error: {e}"),
                |e| e.code().to_owned(),
            )
        }
        Err(reqwest_middleware::Error::Reqwest(e)) => format!("reqwest error: {e}"),
    }
}

fn report(r: &reqwest::Response) -> RetryReport {
    *r.extensions()
        .get::<RetryReport>()
        .expect("RetryReport on every response")
}

fn retry_after(secs: u64) -> ResponseTemplate {
    ResponseTemplate::new(429).insert_header("retry-after", secs.to_string())
}

/// Arrivals at a wiremock server: (path, time), on the server's clock.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<Vec<(String, Instant)>>>);

impl Arrivals {
    fn at(&self, p: &str) -> Vec<Instant> {
        let all = self.0.lock().unwrap();
        all.iter()
            .filter(|(q, _)| q == p)
            .map(|(_, t)| *t)
            .collect()
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    async fn wait_for(&self, n: usize) {
        let give_up = Instant::now() + Duration::from_secs(5);
        while self.len() < n {
            assert!(Instant::now() < give_up, "server never saw {n} requests");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Answers the `i`-th request to a path with `script(path, i)` and records
/// it.
struct Scripted<F> {
    arrivals: Arrivals,
    script: F,
}

impl<F> Respond for Scripted<F>
where
    F: Fn(&str, usize) -> ResponseTemplate + Send + Sync,
{
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut all = self.arrivals.0.lock().unwrap();
        let p = request.url.path().to_owned();
        let i = all.iter().filter(|(q, _)| *q == p).count();
        all.push((p.clone(), Instant::now()));
        (self.script)(&p, i)
    }
}

/// A server answering each path's `i`-th request with `script(path, i)`.
async fn scripted<F>(script: F) -> (MockServer, Arrivals)
where
    F: Fn(&str, usize) -> ResponseTemplate + Send + Sync + 'static,
{
    let server = MockServer::start().await;
    let arrivals = Arrivals::default();
    Mock::given(any())
        .respond_with(Scripted {
            arrivals: arrivals.clone(),
            script,
        })
        .mount(&server)
        .await;
    (server, arrivals)
}

/// `http://127.0.0.1:port`, as the middleware names an origin.
fn origin(server: &MockServer) -> String {
    let a = server.address();
    format!("http://{}:{}", a.ip(), a.port())
}

// ------------------------------------------------------------------ leases

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lease_held_through_one_store_refuses_the_key_in_another() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let prefix = "rbp-lease:";
        // Two connections, one prefix: two processes.
        let a = client(store(&redis, prefix).await, policy());
        let b = client(store(&redis, prefix).await, policy());
        let (server, arrivals) = scripted(|p, i| match (p, i) {
            ("/orders/1", 0) => retry_after(1),
            _ => ResponseTemplate::new(200),
        })
        .await;
        let url = server.uri();

        // A's task is pushed back and waits, holding the key.
        let first = tokio::spawn(
            a.post(format!("{url}/orders/1"))
                .with_extension(IdempotencyKey::new("order-1"))
                .with_extension(Deadline::after(Duration::from_secs(10)))
                .send(),
        );
        arrivals.wait_for(1).await;

        let mut conn = redis.conn();
        let leases = keys(&mut conn, &format!("{prefix}lease:*"));
        assert_eq!(leases.len(), 1, "one lease in Redis: {leases:?}");
        assert!(!leases[0].contains("order-1"), "key text in {leases:?}");
        let ttl = pttl(&mut conn, &leases[0]);
        assert!(
            ttl > 8_000 && ttl <= 10_000,
            "the lease lives until the task's deadline (10 s): {ttl} ms"
        );

        // The same key through the other store: refused, nothing sent.
        let second = b
            .post(format!("{url}/orders/1"))
            .with_extension(IdempotencyKey::new("order-1"))
            .send()
            .await;
        assert_eq!(code(&second), "already_active");
        assert_eq!(arrivals.at("/orders/1").len(), 1, "B sent nothing");

        // Another key is fine.
        let other = b
            .post(format!("{url}/orders/2"))
            .with_extension(IdempotencyKey::new("order-2"))
            .send()
            .await;
        assert_eq!(code(&other), "ok 200 OK");
        assert_eq!(arrivals.at("/orders/2").len(), 1);

        let first = first.await.expect("task").expect("A's task succeeds");
        assert_eq!(first.status(), 200);
        assert_eq!(report(&first).attempts(), 2);
        let at = arrivals.at("/orders/1");
        assert_eq!(at.len(), 2);
        assert!(at[1] - at[0] >= Duration::from_secs(1), "retry too early");

        // Release runs as a spawned task: give it a moment.
        let give_up = Instant::now() + Duration::from_secs(2);
        while !keys(&mut conn, &format!("{prefix}*lease*")).is_empty() {
            assert!(Instant::now() < give_up, "lease not released in Redis");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // ...and B may now run the key.
        let again = b
            .post(format!("{url}/orders/1"))
            .with_extension(IdempotencyKey::new("order-1"))
            .send()
            .await;
        assert_eq!(code(&again), "ok 200 OK");
        assert_eq!(arrivals.at("/orders/1").len(), 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holders_lease_frees_itself() {
    bounded(Duration::from_secs(10), async {
        let redis = RedisServer::start();
        let prefix = "rbp-crash:";
        let one = store(&redis, prefix).await;
        let two = store(&redis, prefix).await;

        // Taken and never released: the holder "crashed".
        let held = Store::acquire(&one, "job-7", Duration::from_millis(300)).await;
        assert!(matches!(held, Ok(Some(_))), "{held:?}");
        let refused = Store::acquire(&two, "job-7", Duration::from_secs(5)).await;
        assert_eq!(refused, Ok(None), "held by the other process");

        let mut conn = redis.conn();
        let leases = keys(&mut conn, &format!("{prefix}lease:*"));
        assert_eq!(leases.len(), 1);
        let ttl = pttl(&mut conn, &leases[0]);
        assert!(ttl > 0 && ttl <= 300, "lease TTL {ttl} ms");

        tokio::time::sleep(Duration::from_millis(500)).await;
        let taken = Store::acquire(&two, "job-7", Duration::from_secs(5)).await;
        assert!(matches!(taken, Ok(Some(_))), "expired lease: {taken:?}");
    })
    .await;
}

// --------------------------------------------------------------- key names

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_key_has_a_ttl_and_a_safe_name() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let prefix = "rbp-ttl:";
        let c = client(
            store(&redis, prefix).await,
            policy().missing_retry_after(Fallback::Delay(Duration::from_millis(200))),
        );
        let (server, arrivals) = scripted(|_, i| match i {
            0 => retry_after(1),
            _ => ResponseTemplate::new(200),
        })
        .await;
        let (bare, bare_arrivals) = scripted(|_, i| match i {
            // No Retry-After: the retry spends the shared budget.
            0 => ResponseTemplate::new(429),
            _ => ResponseTemplate::new(200),
        })
        .await;

        let keyed = tokio::spawn(
            c.post(format!("{}/search?token=secret-token&q=x", server.uri()))
                .with_extension(IdempotencyKey::new("user-key-1234"))
                .send(),
        );
        let budgeted = tokio::spawn(
            c.get(format!("{}/list?token=secret-token", bare.uri()))
                .send(),
        );
        arrivals.wait_for(1).await;
        bare_arrivals.wait_for(1).await;

        let mut conn = redis.conn();
        let check = |conn: &mut redis::Connection, when: &str| -> Vec<String> {
            let all = keys(conn, "*");
            for k in &all {
                assert!(k.starts_with(prefix), "{when}: unprefixed key {k:?}");
                for bad in [
                    "?",
                    "token",
                    "secret",
                    "search",
                    "list",
                    "127.0.0.1",
                    "http",
                    "user-key",
                ] {
                    assert!(!k.contains(bad), "{when}: key {k:?} contains {bad:?}");
                }
                let ttl = pttl(conn, k);
                assert!(ttl > 0, "{when}: key {k:?} has no TTL ({ttl})");
            }
            all
        };
        // While the keyed task waits: its lease is there, with a TTL.
        let during = check(&mut conn, "during");
        assert!(
            during
                .iter()
                .any(|k| k.starts_with(&format!("{prefix}lease:"))),
            "no lease while waiting: {during:?}"
        );

        let keyed = keyed.await.expect("task").expect("keyed request");
        let budgeted = budgeted.await.expect("task").expect("budgeted request");
        assert_eq!(keyed.status(), 200);
        assert_eq!(budgeted.status(), 200);
        assert_eq!(report(&keyed).attempts(), 2);
        assert_eq!(report(&budgeted).attempts(), 2);
        tokio::time::sleep(Duration::from_millis(200)).await;

        let after = check(&mut conn, "after");
        let origins = after
            .iter()
            .filter(|k| k.starts_with(&format!("{prefix}origin:")))
            .count();
        assert_eq!(origins, 2, "one entry per origin: {after:?}");
        assert!(after.contains(&format!("{prefix}budget")), "{after:?}");
        assert!(
            !after.iter().any(|k| k.contains("lease")),
            "lease left behind: {after:?}"
        );
    })
    .await;
}

// ------------------------------------------------------------- origin gate

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gate_learned_through_one_store_holds_the_other() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let prefix = "rbp-gate:";
        let one = store(&redis, prefix).await;
        let two = store(&redis, prefix).await;
        let a = client(one, policy());
        let b = client(two.clone(), policy());
        // The first request anywhere on the origin is told to wait 2 s.
        let seen = Arc::new(Mutex::new(0usize));
        let (server, arrivals) = {
            let seen = Arc::clone(&seen);
            scripted(move |_, _| {
                let mut n = seen.lock().unwrap();
                *n += 1;
                if *n == 1 {
                    retry_after(2)
                } else {
                    ResponseTemplate::new(200)
                }
            })
            .await
        };
        let url = server.uri();

        let first = tokio::spawn(
            a.get(format!("{url}/a"))
                .with_extension(Deadline::after(Duration::from_secs(10)))
                .send(),
        );
        arrivals.wait_for(1).await;
        let told = arrivals.at("/a")[0] + Duration::from_secs(2);

        // The other store sees the gate A's answer closed.
        let give_up = Instant::now() + Duration::from_secs(2);
        loop {
            match Store::gate(&two, &origin(&server)).await {
                Ok(Some(left)) => {
                    assert!(left <= Duration::from_secs(2), "gate {left:?}");
                    break;
                }
                Ok(None) => {}
                Err(e) => panic!("gate: {e}"),
            }
            assert!(Instant::now() < give_up, "store 2 never saw the gate");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        // A deadline shorter than the gate: refused at once, nothing sent.
        let t = Instant::now();
        let short = b
            .get(format!("{url}/b"))
            .with_extension(Deadline::after(Duration::from_secs(1)))
            .send()
            .await;
        assert_eq!(code(&short), "origin_gate_closed");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        if let Err(reqwest_middleware::Error::Middleware(e)) = &short {
            let e = e.downcast_ref::<reqwest_backpressure::Error>().unwrap();
            let at = e.retry_at().expect("gate time in the error");
            let left = at.duration_since(SystemTime::now()).unwrap_or_default();
            assert!(left <= Duration::from_secs(2), "retry_at {left:?} ahead");
        }
        assert!(arrivals.at("/b").is_empty(), "B sent despite the gate");

        // A deadline past the gate: waits for it, then is sent once.
        let waited = b
            .get(format!("{url}/b"))
            .with_extension(Deadline::after(Duration::from_secs(10)))
            .send()
            .await
            .expect("B after the gate");
        assert_eq!(waited.status(), 200);
        assert_eq!(report(&waited).attempts(), 1, "waiting at a gate is free");
        let b_at = arrivals.at("/b");
        assert_eq!(b_at.len(), 1);
        assert!(
            b_at[0] >= told,
            "B arrived {:?} before the gate A learned",
            told - b_at[0]
        );

        let first = first.await.expect("task").expect("A's task");
        assert_eq!(first.status(), 200);
        let a_at = arrivals.at("/a");
        assert_eq!(a_at.len(), 2);
        assert!(a_at[1] >= told, "A's retry before its Retry-After");
    })
    .await;
}

// ----------------------------------------------------------- many processes

/// Requests admitted per one-second window by [`LimitServer`].
const CAP: u32 = 8;
/// How long the server holds each request (it is in flight meanwhile).
const HOLD: Duration = Duration::from_millis(25);
/// Time a gate may take to reach every process: a 429 is received, recorded
/// in Redis, and requests admitted just before are still on the wire.
const PROPAGATION: Duration = Duration::from_millis(250);

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    worker: String,
    task: String,
    key: String,
    arrived: Instant,
    /// When the server started writing the answer (the request was in
    /// flight from `arrived` to here).
    answered: Instant,
    /// For a 429: the earliest time its Retry-After allowed a retry,
    /// measured from `answered`.
    told: Option<Instant>,
}

#[derive(Default)]
struct LimitLog {
    window: u64,
    admitted: u32,
    in_flight: HashMap<String, u32>,
    /// Requests that arrived while another with the same key was in flight.
    overlaps: Vec<String>,
    seen: Vec<Seen>,
}

/// A small HTTP/1.1 server (std threads, one per connection) that admits
/// [`CAP`] requests per one-second window and answers the rest `429` with a
/// whole-second `Retry-After` reaching the next window. It tracks requests in
/// flight per `Idempotency-Key`.
struct LimitServer {
    port: u16,
    log: Arc<Mutex<LimitLog>>,
    stop: Arc<AtomicBool>,
}

impl LimitServer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let start = Instant::now();
        let log = Arc::new(Mutex::new(LimitLog::default()));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let log = Arc::clone(&log);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let log = Arc::clone(&log);
                    std::thread::spawn(move || serve(conn, start, &log));
                }
            });
        }
        LimitServer { port, log, stop }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for LimitServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Serves one keep-alive connection until the client closes it.
fn serve(conn: TcpStream, start: Instant, log: &Mutex<LimitLog>) {
    let _ = conn.set_nodelay(true);
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    loop {
        let mut headers = HashMap::new();
        let mut line = String::new();
        // Request line.
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.trim().is_empty() {
            continue;
        }
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((name, value)) = l.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
        let len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let arrived = Instant::now();
        let header = |name: &str| headers.get(name).cloned().unwrap_or_default();
        let key = header("idempotency-key");
        let retry_after = {
            let mut log = log.lock().unwrap();
            let n = log.in_flight.entry(key.clone()).or_default();
            *n += 1;
            if *n > 1 {
                log.overlaps.push(key.clone());
            }
            let window = (arrived - start).as_secs();
            if window != log.window {
                log.window = window;
                log.admitted = 0;
            }
            if log.admitted < CAP {
                log.admitted += 1;
                None
            } else {
                // Whole seconds, reaching at least the next window.
                let next = start + Duration::from_secs(window + 1);
                Some((next - arrived).as_secs_f64().ceil().max(1.0) as u64)
            }
        };
        std::thread::sleep(HOLD);
        let answered = Instant::now();
        {
            let mut log = log.lock().unwrap();
            if let Some(n) = log.in_flight.get_mut(&key) {
                *n -= 1;
            }
            log.seen.push(Seen {
                worker: header("x-worker"),
                task: header("x-task"),
                key,
                arrived,
                answered,
                told: retry_after.map(|s| answered + Duration::from_secs(s)),
            });
        }
        let response = match retry_after {
            None => "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_owned(),
            Some(s) => format!(
                "HTTP/1.1 429 Too Many Requests\r\nretry-after: {s}\r\ncontent-length: 0\r\n\r\n"
            ),
        };
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

const WORKERS: usize = 4;
const TASKS: usize = 30;
/// Task `i` of worker `w` uses key `(i + w) % KEYS`: every key is used by
/// every worker, one [`STAGGER`] apart, so a task pushed back (holding its
/// key for a second or more) meets the same key from the other processes.
/// At most `KEYS` tasks run at once across all processes.
const KEYS: usize = 20;
/// Time between two task starts within a worker.
const STAGGER: Duration = Duration::from_millis(60);

/// What one worker process reported.
#[derive(Debug, Default)]
struct WorkerResult {
    ok: usize,
    already_active: usize,
    failed: usize,
    refused_tasks: Vec<String>,
    failures: String,
}

fn parse_result(stdout: &str) -> Option<WorkerResult> {
    let line = stdout.lines().find(|l| l.starts_with("RESULT "))?;
    let mut r = WorkerResult::default();
    for field in line["RESULT ".len()..].split(' ') {
        let (name, value) = field.split_once('=')?;
        match name {
            "ok" => r.ok = value.parse().ok()?,
            "already_active" => r.already_active = value.parse().ok()?,
            "failed" => r.failed = value.parse().ok()?,
            "refused" => {
                r.refused_tasks = value
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            "failures" => r.failures = value.to_owned(),
            _ => {}
        }
    }
    Some(r)
}

/// Several OS processes (this test binary, re-run as [`worker_process`])
/// share one Redis and hit one rate-limited server with keys shared across
/// processes.
#[test]
fn processes_sharing_one_redis_share_leases_and_gates() {
    let started = Instant::now();
    let redis = RedisServer::start();
    let server = LimitServer::start();
    let exe = std::env::current_exe().expect("current test binary");
    let prefix = format!("rbp-multi-{}:", std::process::id());

    let mut workers = Workers(Vec::new());
    let mut outputs = Vec::new();
    for w in 0..WORKERS {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "redis::worker_process",
                "--ignored",
                "--nocapture",
            ])
            .env("RBP_REDIS_URL", redis.url())
            .env("RBP_SERVER_URL", server.url())
            .env("RBP_PREFIX", &prefix)
            .env("RBP_WORKER", w.to_string())
            .env("RBP_TASKS", TASKS.to_string())
            .env("RBP_KEYS", KEYS.to_string())
            .env("RBP_STAGGER_MS", STAGGER.as_millis().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worker process");
        // Read the pipes on threads, so a chatty child never blocks.
        let read = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = pipe.read_to_string(&mut s);
                s
            })
        };
        let out = read(Box::new(child.stdout.take().expect("stdout")));
        let err = read(Box::new(child.stderr.take().expect("stderr")));
        outputs.push((out, err));
        workers.0.push(child);
    }

    let give_up = Instant::now() + Duration::from_secs(25);
    let mut statuses = vec![None; WORKERS];
    while statuses.iter().any(Option::is_none) {
        for (w, child) in workers.0.iter_mut().enumerate() {
            if statuses[w].is_none() {
                statuses[w] = child.try_wait().expect("try_wait");
            }
        }
        assert!(
            Instant::now() < give_up,
            "workers still running after 25 s: {statuses:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut results = Vec::new();
    for (w, (out, err)) in outputs.into_iter().enumerate() {
        let out = out.join().expect("stdout reader");
        let err = err.join().expect("stderr reader");
        let status = statuses[w].expect("exited");
        assert!(
            status.success(),
            "worker {w} failed ({status}):\n{out}\n{err}"
        );
        let r = parse_result(&out)
            .unwrap_or_else(|| panic!("worker {w} printed no RESULT line:\n{out}\n{err}"));
        results.push(r);
    }

    let log = server.log.lock().unwrap();
    let seen = &log.seen;
    let ok: usize = results.iter().map(|r| r.ok).sum();
    let refused: usize = results.iter().map(|r| r.already_active).sum();
    let failed: usize = results.iter().map(|r| r.failed).sum();
    let pushed_back: Vec<&Seen> = seen.iter().filter(|s| s.told.is_some()).collect();
    eprintln!(
        "multi-process: {ok} ok, {refused} already_active, {failed} failed; \
         server saw {} requests, {} pushed back; {:?} elapsed",
        seen.len(),
        pushed_back.len(),
        started.elapsed()
    );

    // Every task either succeeded or found its key active elsewhere.
    let failures: Vec<&str> = results.iter().map(|r| r.failures.as_str()).collect();
    assert_eq!(failed, 0, "failures: {failures:?}");
    assert_eq!(ok + refused, WORKERS * TASKS);
    assert!(ok > 0 && refused > 0, "ok {ok}, already_active {refused}");

    // Never two in flight for one key (precise: counted by the server).
    assert!(log.overlaps.is_empty(), "overlaps: {:?}", log.overlaps);
    // The same, from the intervals.
    let mut by_key: BTreeMap<&str, Vec<(Instant, Instant)>> = BTreeMap::new();
    for s in seen {
        by_key
            .entry(s.key.as_str())
            .or_default()
            .push((s.arrived, s.answered));
    }
    for (key, mut spans) in by_key {
        spans.sort();
        for pair in spans.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "two requests in flight at once for key {key}"
            );
        }
    }

    // One 200 per succeeded task; a refused task sent nothing.
    let successes = seen.iter().filter(|s| s.told.is_none()).count();
    assert_eq!(successes, ok, "a task was answered 200 twice, or lost");
    let mut per_task: HashMap<&str, usize> = HashMap::new();
    for s in seen.iter().filter(|s| s.told.is_none()) {
        *per_task.entry(s.task.as_str()).or_default() += 1;
    }
    assert!(per_task.values().all(|&n| n == 1), "a task succeeded twice");
    for r in &results {
        for t in &r.refused_tasks {
            assert!(
                !seen.iter().any(|s| &s.task == t),
                "task {t} got already_active but sent a request"
            );
        }
    }

    // 0 premature: no retry of a task before the time its own 429 gave.
    let mut premature = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        if let Some(told) = s.told {
            for later in &seen[i + 1..] {
                if later.task == s.task && later.arrived < told {
                    premature.push((s.task.clone(), told - later.arrived));
                }
            }
        }
    }
    assert!(premature.is_empty(), "premature retries: {premature:?}");

    // The gate holds every process: once a 429 has had time to reach Redis,
    // no request from ANY worker arrives before its Retry-After time.
    assert!(!pushed_back.is_empty(), "the server never pushed back");
    let mut through_gate = Vec::new();
    for p in &pushed_back {
        let told = p.told.expect("429");
        for s in seen {
            if s.arrived > p.answered + PROPAGATION && s.arrived < told {
                through_gate.push(format!(
                    "worker {} arrived {:?} before the gate worker {} was given",
                    s.worker,
                    told - s.arrived,
                    p.worker
                ));
            }
        }
    }
    assert!(through_gate.is_empty(), "{through_gate:#?}");
    // ...and the others were there to be held: after the first 429, other
    // workers' requests still came (all after its gate).
    let first = pushed_back[0];
    let others_after = seen
        .iter()
        .filter(|s| s.worker != first.worker && s.arrived > first.answered)
        .count();
    assert!(others_after > 0, "no other worker sent after the first 429");

    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

/// One worker process of [`processes_sharing_one_redis_share_leases_and_gates`];
/// does nothing unless started by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a child process of processes_sharing_one_redis_share_leases_and_gates"]
async fn worker_process() {
    let Ok(redis_url) = std::env::var("RBP_REDIS_URL") else {
        return;
    };
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"));
    let server = var("RBP_SERVER_URL");
    let worker = var("RBP_WORKER");
    let tasks: usize = var("RBP_TASKS").parse().expect("RBP_TASKS");
    let keys: usize = var("RBP_KEYS").parse().expect("RBP_KEYS");
    let stagger = Duration::from_millis(var("RBP_STAGGER_MS").parse().expect("stagger"));
    let w: usize = worker.parse().expect("RBP_WORKER");

    // Closed: a Redis failure shows up as a failed task, never as a silently
    // unshared run.
    let store = RedisStore::connect(&redis_url)
        .await
        .expect("worker: connect to Redis")
        .prefix(var("RBP_PREFIX"))
        .fail_mode(FailMode::Closed);
    let client = client(
        store,
        Policy::default()
            .max_attempts(30)
            .max_wait(Duration::from_secs(10))
            .jitter(Duration::from_millis(50))
            .default_deadline(Duration::from_secs(20)),
    );

    let mut handles = Vec::new();
    for i in 0..tasks {
        let client = client.clone();
        let url = format!("{server}/jobs");
        let worker = worker.clone();
        handles.push(tokio::spawn(async move {
            tokio::time::sleep(stagger * u32::try_from(i).expect("small")).await;
            let task = format!("{worker}-{i}");
            let result = client
                .post(url)
                .header("x-worker", &worker)
                .header("x-task", &task)
                .with_extension(IdempotencyKey::new(format!("job-{}", (i + w) % keys)))
                .body("payload")
                .send()
                .await;
            let outcome = match &result {
                Ok(r) if r.status() == 200 => "ok".to_owned(),
                Ok(r) => format!(
                    "status_{}_{}",
                    r.status().as_u16(),
                    report(r).stop_reason().map_or("none", |s| s.code())
                ),
                Err(_) => code(&result),
            };
            (task, outcome)
        }));
    }
    let (mut ok, mut already_active, mut failures, mut refused) = (0, 0, Vec::new(), Vec::new());
    for h in handles {
        let (task, outcome) = h.await.expect("task panicked");
        match outcome.as_str() {
            "ok" => ok += 1,
            "already_active" => {
                already_active += 1;
                refused.push(task);
            }
            other => failures.push(format!("{task}:{}", other.replace(' ', "_"))),
        }
    }
    println!(
        "RESULT ok={ok} already_active={already_active} failed={} refused={} failures={}",
        failures.len(),
        refused.join(","),
        failures.join(",")
    );
}

// ------------------------------------------------------------------ faults

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_open_keeps_working_on_local_state_and_reconnects() {
    bounded(Duration::from_secs(40), async {
        let mut redis = RedisServer::start();
        let prefix = "rbp-open:";
        let s = store(&redis, prefix).await; // FailMode::Open is the default
        let c = client(s.clone(), policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = server.uri();

        redis.stop();

        // Keyed and unkeyed requests go through on local state, promptly,
        // each sent exactly once.
        for i in 0..4 {
            let t = Instant::now();
            let mut req = c.post(format!("{url}/down/{i}"));
            if i % 2 == 0 {
                req = req.with_extension(IdempotencyKey::new(format!("k-{i}")));
            }
            let r = req.send().await;
            assert_eq!(code(&r), "ok 200 OK", "request {i} with Redis down");
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "request {i} took {:?}",
                t.elapsed()
            );
        }
        assert_eq!(arrivals.len(), 4, "each request sent exactly once");

        // Leases still hold within this process.
        let (wait_server, wait_arrivals) = scripted(|_, i| match i {
            0 => retry_after(1),
            _ => ResponseTemplate::new(200),
        })
        .await;
        let holder = tokio::spawn(
            c.post(format!("{}/local", wait_server.uri()))
                .with_extension(IdempotencyKey::new("local-key"))
                .send(),
        );
        wait_arrivals.wait_for(1).await;
        let dup = c
            .post(format!("{}/local", wait_server.uri()))
            .with_extension(IdempotencyKey::new("local-key"))
            .send()
            .await;
        assert_eq!(code(&dup), "already_active", "local lease while down");
        let holder = holder.await.expect("task").expect("holder");
        assert_eq!(holder.status(), 200);
        assert_eq!(wait_arrivals.at("/local").len(), 2, "sent exactly twice");

        // Redis comes back on the same port: the store reconnects.
        redis.restart();
        let mut conn = redis.conn();
        let give_up = Instant::now() + Duration::from_secs(10);
        let mut probe = 0;
        loop {
            probe += 1;
            let lease = Store::acquire(&s, &format!("probe-{probe}"), Duration::from_secs(2))
                .await
                .expect("fail open never errors");
            assert!(lease.is_some());
            if !keys(&mut conn, &format!("{prefix}lease:*")).is_empty() {
                break;
            }
            assert!(Instant::now() < give_up, "the store never reconnected");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // Shared state works again: a waiting task's lease is in Redis and
        // another process's store refuses the key.
        let (back_server, back_arrivals) = scripted(|_, i| match i {
            0 => retry_after(1),
            _ => ResponseTemplate::new(200),
        })
        .await;
        let before = keys(&mut conn, &format!("{prefix}lease:*")).len();
        let waiting = tokio::spawn(
            c.post(format!("{}/back", back_server.uri()))
                .with_extension(IdempotencyKey::new("back-key"))
                .send(),
        );
        back_arrivals.wait_for(1).await;
        let leases = keys(&mut conn, &format!("{prefix}lease:*"));
        assert_eq!(leases.len(), before + 1, "the waiting task's lease");
        let other = client(store(&redis, prefix).await, policy());
        let dup = other
            .post(format!("{}/back", back_server.uri()))
            .with_extension(IdempotencyKey::new("back-key"))
            .send()
            .await;
        assert_eq!(code(&dup), "already_active", "shared lease after restart");
        let waiting = waiting.await.expect("task").expect("waiting task");
        assert_eq!(waiting.status(), 200);
        assert_eq!(back_arrivals.at("/back").len(), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_closed_refuses_without_sending_and_recovers() {
    bounded(Duration::from_secs(30), async {
        let mut redis = RedisServer::start();
        let s = store(&redis, "rbp-closed:")
            .await
            .fail_mode(FailMode::Closed);
        let c = client(s, policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = server.uri();

        redis.stop();
        for keyed in [true, false] {
            let t = Instant::now();
            let mut req = c.post(format!("{url}/x"));
            if keyed {
                req = req.with_extension(IdempotencyKey::new("closed-key"));
            }
            let r = tokio::time::timeout(Duration::from_secs(5), req.send())
                .await
                .expect("a closed store must not hang the request");
            assert_eq!(code(&r), "store_unavailable", "keyed: {keyed}");
            assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        }
        assert_eq!(arrivals.len(), 0, "nothing sent while failing closed");

        // Back up: requests flow again (after the store reconnects); every
        // refusal before that sent nothing.
        redis.restart();
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            let r = c
                .post(format!("{url}/x"))
                .with_extension(IdempotencyKey::new("closed-key"))
                .send()
                .await;
            match code(&r).as_str() {
                "ok 200 OK" => break,
                "store_unavailable" => assert_eq!(arrivals.len(), 0),
                other => panic!("unexpected outcome {other}"),
            }
            assert!(Instant::now() < give_up, "the store never reconnected");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(arrivals.len(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_dying_while_a_task_waits() {
    bounded(Duration::from_secs(30), async {
        for mode in [FailMode::Open, FailMode::Closed] {
            let mut redis = RedisServer::start();
            let c = client(store(&redis, "rbp-mid:").await.fail_mode(mode), policy());
            let (server, arrivals) = scripted(|_, i| match i {
                0 => retry_after(1),
                _ => ResponseTemplate::new(200),
            })
            .await;
            let task = tokio::spawn(
                c.post(format!("{}/mid", server.uri()))
                    .with_extension(IdempotencyKey::new("mid-key"))
                    .send(),
            );
            arrivals.wait_for(1).await;
            // Let the pushback be recorded, then kill Redis mid-wait.
            tokio::time::sleep(Duration::from_millis(200)).await;
            redis.stop();
            let r = tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("the waiting task must not hang")
                .expect("task");
            let at = arrivals.at("/mid");
            match mode {
                FailMode::Open => {
                    assert_eq!(code(&r), "ok 200 OK");
                    assert_eq!(report(r.as_ref().unwrap()).attempts(), 2);
                    assert_eq!(at.len(), 2, "sent exactly twice");
                    assert!(at[1] - at[0] >= Duration::from_secs(1), "retry early");
                }
                FailMode::Closed => {
                    // Today `store_unavailable`; the 429 itself once the bug
                    // in `fail_closed_after_a_pushback_returns_the_pushback`
                    // is fixed. Either way: nothing more is sent.
                    let c = code(&r);
                    assert!(
                        c == "store_unavailable" || c == "ok 429 Too Many Requests",
                        "{c}"
                    );
                    assert_eq!(at.len(), 1, "nothing more sent");
                }
            }
        }
    })
    .await;
}

/// Sends one keyed request whose first answer (`first`, delayed 500 ms) is
/// still on its way when Redis dies; the retry, if any, gets a 200. Returns
/// the outcome and how many requests the server received.
async fn redis_dies_during_first_answer(
    mode: FailMode,
    first: ResponseTemplate,
) -> (reqwest_middleware::Result<reqwest::Response>, usize) {
    let mut redis = RedisServer::start();
    let policy = policy().missing_retry_after(Fallback::Delay(Duration::from_millis(300)));
    let c = client(store(&redis, "rbp-sent:").await.fail_mode(mode), policy);
    let first = first.set_delay(Duration::from_millis(500));
    let (server, arrivals) = scripted(move |_, i| match i {
        0 => first.clone(),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let task = tokio::spawn(
        c.post(format!("{}/sent", server.uri()))
            .with_extension(IdempotencyKey::new("sent-key"))
            .send(),
    );
    // The request is at the server, its answer delayed: Redis dies.
    arrivals.wait_for(1).await;
    redis.stop();
    let r = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("no hang")
        .expect("task");
    (r, arrivals.len())
}

/// `store_unavailable` means "nothing was sent": a caller may then safely
/// send again. An answer that arrived must reach the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_closed_still_returns_an_answer_that_arrived() {
    bounded(Duration::from_secs(20), async {
        let (r, sent) =
            redis_dies_during_first_answer(FailMode::Closed, ResponseTemplate::new(200)).await;
        assert_eq!(code(&r), "ok 200 OK", "the server's 200 was lost");
        assert_eq!(sent, 1);
    })
    .await;
}

/// Like [`fail_closed_still_returns_an_answer_that_arrived`], for a 429:
/// the retry cannot be sent (the store fails closed), so the task should
/// stop with the 429 the server sent (DESIGN: "a stopped task is returned
/// as the last real response"), not with `store_unavailable`, whose
/// documentation says nothing was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_closed_after_a_pushback_returns_the_pushback() {
    bounded(Duration::from_secs(20), async {
        for (label, first) in [
            ("429 Retry-After: 1", retry_after(1)),
            ("429 without Retry-After", ResponseTemplate::new(429)),
        ] {
            let (r, sent) = redis_dies_during_first_answer(FailMode::Closed, first).await;
            assert_eq!(sent, 1, "{label}: nothing sent after Redis died");
            assert_eq!(
                code(&r),
                "ok 429 Too Many Requests",
                "{label}: the caller got {} although the server received and \
                 answered a request",
                code(&r)
            );
            let stop = r.as_ref().ok().and_then(|r| report(r).stop_reason());
            assert_eq!(stop.map(|s| s.code()), Some("store_unavailable"), "{label}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_redis_times_out_instead_of_hanging() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let open = client(store(&redis, "rbp-frozen:").await, policy());
        let closed = client(
            store(&redis, "rbp-frozen:")
                .await
                .fail_mode(FailMode::Closed),
            policy(),
        );
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = server.uri();

        // Connections stay open, nothing answers: only timeouts help.
        redis.signal("-STOP");
        let t = Instant::now();
        let r = open
            .post(format!("{url}/open"))
            .with_extension(IdempotencyKey::new("frozen-1"))
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
        // Three store operations at most 500 ms each.
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert_eq!(arrivals.at("/open").len(), 1);

        let t = Instant::now();
        let r = closed
            .post(format!("{url}/closed"))
            .with_extension(IdempotencyKey::new("frozen-2"))
            .send()
            .await;
        assert_eq!(code(&r), "store_unavailable");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        assert!(arrivals.at("/closed").is_empty());
        redis.signal("-CONT");
    })
    .await;
}

/// The same key, sent again the moment its task ended, is free: the
/// lease's release (spawned from `Drop`) may not have reached Redis yet,
/// but the next acquire frees this process's own stale lease first.
#[tokio::test(flavor = "current_thread")]
async fn a_key_is_free_again_the_moment_its_task_ends() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let client = client(store(&redis, "rbp-reuse:").await, policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        for i in 0..50 {
            let r = client
                .post(format!("{}/again", server.uri()))
                .with_extension(IdempotencyKey::new("same-key"))
                .send()
                .await;
            assert_eq!(code(&r), "ok 200 OK", "send {i}");
        }
        assert_eq!(arrivals.at("/again").len(), 50);
    })
    .await;
}

/// Finished tasks leave nothing behind in the process either: the local
/// copy of each lease goes with it, so a later Redis outage does not refuse
/// keys that nobody runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_keys_leave_no_local_lease_behind() {
    bounded(Duration::from_secs(20), async {
        let mut redis = RedisServer::start();
        let store = store(&redis, "rbp-local:").await;
        let local = store.local().clone();
        let client = client(store, policy());
        let (server, _arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        for i in 0..100 {
            let r = client
                .post(format!("{}/k", server.uri()))
                .with_extension(IdempotencyKey::new(format!("k-{i}")))
                .send()
                .await;
            assert_eq!(code(&r), "ok 200 OK");
        }
        assert_eq!(local.len(), 0, "local leases left behind");
        redis.stop();
        let r = client
            .post(format!("{}/k", server.uri()))
            .with_extension(IdempotencyKey::new("k-7"))
            .send()
            .await;
        assert_eq!(
            code(&r),
            "ok 200 OK",
            "a finished key is refused while Redis is down"
        );
    })
    .await;
}

/// A burst of first sends against a healthy Redis, failing closed: none is
/// refused for contention or slowness of this process's own queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_against_a_healthy_redis_is_not_refused() {
    bounded(Duration::from_secs(40), async {
        let redis = RedisServer::start();
        let store = store(&redis, "rbp-burst:")
            .await
            .fail_mode(FailMode::Closed);
        let client = client(store, policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let tasks: Vec<_> = (0..1000)
            .map(|_| {
                let client = client.clone();
                let url = format!("{}/burst", server.uri());
                tokio::spawn(async move { code(&client.get(url).send().await) })
            })
            .collect();
        let mut refused = 0;
        for t in tasks {
            if t.await.expect("task") != "ok 200 OK" {
                refused += 1;
            }
        }
        assert_eq!(refused, 0, "of 1000 sends");
        assert_eq!(arrivals.at("/burst").len(), 1000);
    })
    .await;
}

/// A caller that gives up while the lease's round trip to Redis is in
/// flight leaves no lease behind, locally or in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_giving_up_during_the_lease_leaves_no_lease() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let store = store(&redis, "rbp-cancel:").await;
        let local = store.local().clone();
        let client = client(store, policy());
        let (server, _arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = format!("{}/c", server.uri());
        // Warm the connection and the script cache.
        let r = client
            .post(&url)
            .with_extension(IdempotencyKey::new("warm"))
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
        tokio::time::sleep(Duration::from_millis(100)).await;

        redis.signal("-STOP");
        let fut = client
            .post(&url)
            .with_extension(IdempotencyKey::new("cancel-me"))
            .with_extension(Deadline::after(Duration::from_secs(30)))
            .send();
        assert!(
            tokio::time::timeout(Duration::from_millis(100), fut)
                .await
                .is_err()
        );
        assert_eq!(local.len(), 0, "the local lease outlived its caller");
        redis.signal("-CONT");
        tokio::time::sleep(Duration::from_millis(800)).await;
        let mut conn = redis.conn();
        assert_eq!(keys(&mut conn, "rbp-cancel:lease:*"), Vec::<String>::new());
        let r = client
            .post(&url)
            .with_extension(IdempotencyKey::new("cancel-me"))
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
    })
    .await;
}

/// Failing closed on a lease whose round trip timed out: if Redis applies
/// the lease after all, it is released, so the caller's own retry and
/// other processes are not refused for the lease's whole TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_timed_out_failing_closed_is_released_later() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let a = store(&redis, "rbp-late:")
            .await
            .fail_mode(FailMode::Closed)
            .op_timeout(Duration::from_millis(100));
        let b = store(&redis, "rbp-late:").await;
        for (s, key) in [(&a, "warm-a"), (&b, "warm-b")] {
            let t = s
                .acquire(key, Duration::from_secs(30))
                .await
                .expect("redis up")
                .expect("free");
            s.release(key, t);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        redis.signal("-STOP");
        let frozen = a.acquire("k", Duration::from_secs(30)).await;
        assert!(frozen.is_err(), "{frozen:?}");
        assert_eq!(a.local().len(), 0);
        redis.signal("-CONT");
        tokio::time::sleep(Duration::from_millis(800)).await;
        let other = b.acquire("k", Duration::from_secs(30)).await;
        assert!(matches!(other, Ok(Some(_))), "{other:?}");
    })
    .await;
}

/// 2xx answers counted locally reach Redis within about 100 ms even when
/// the process writes nothing else, so a pace learned in another process
/// includes them, as the in-memory store's would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successes_reach_the_shared_pace_without_another_write() {
    use reqwest_backpressure::planner::{Admission, PacingConfig};
    use reqwest_backpressure::store::Outcome;
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let a = store(&redis, "rbp-learn:").await;
        let b = store(&redis, "rbp-learn:").await;
        let cfg = PacingConfig {
            gate: true,
            pace: true,
            max_gate: Duration::from_secs(60),
        };
        let budget = reqwest_backpressure::RetryBudget::unlimited();
        let o = "http://example.test:80";
        let m = reqwest_backpressure::MemoryStore::new();
        for _ in 0..50 {
            let ad = b
                .admit(o, cfg, &budget, Duration::from_secs(10), true)
                .await
                .expect("redis up");
            assert_eq!(ad, Admission::Now);
            let _ = m
                .admit(o, cfg, &budget, Duration::from_secs(10), true)
                .await;
        }
        for _ in 0..50 {
            b.record(o, cfg, Outcome::Admitted).await.expect("redis up");
            m.record(o, cfg, Outcome::Admitted).await.expect("memory");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let back = Outcome::Pushback {
            retry_in: Some(Duration::from_secs(1)),
        };
        a.record(o, cfg, back).await.expect("redis up");
        m.record(o, cfg, back).await.expect("memory");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let _ = a
            .admit(o, cfg, &budget, Duration::from_secs(10), false)
            .await
            .expect("redis up");
        let _ = m
            .admit(o, cfg, &budget, Duration::from_secs(10), false)
            .await;
        let mut conn = redis.conn();
        let k = keys(&mut conn, "rbp-learn:origin:*");
        let v: String = redis::cmd("GET")
            .arg(&k[0])
            .query(&mut conn)
            .expect("origin state");
        let shared = reqwest_backpressure::planner::OriginState::decode(&v).expect("decodes");
        let local = m.origin_rate(o).expect("known origin");
        assert!(local > 30.0, "memory store learned {local}");
        assert!(
            (shared.rate() - local).abs() / local < 0.2,
            "shared {} vs memory {local}",
            shared.rate()
        );
    })
    .await;
}

/// A worker that starts while Redis is away works on local state (failing
/// open) and shares its state once Redis is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_store_starts_without_redis_and_joins_it_later() {
    bounded(Duration::from_secs(30), async {
        let mut redis = RedisServer::start();
        redis.stop();
        let store = RedisStore::connect_lazy(&redis.url())
            .await
            .expect("a valid url is enough")
            .prefix("rbp-lazy:");
        let client = client(store, policy());
        let (server, arrivals) = scripted(|p, i| {
            if p == "/wait" && i % 2 == 0 {
                retry_after(1)
            } else {
                ResponseTemplate::new(200)
            }
        })
        .await;
        let t = Instant::now();
        let r = client
            .post(format!("{}/down", server.uri()))
            .with_extension(IdempotencyKey::new("while-down"))
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

        redis.restart();
        // Within a few attempts the manager reconnects; then a waiting keyed
        // task's lease is visible in Redis.
        let mut seen = false;
        for _ in 0..10 {
            let waiting = tokio::spawn({
                let client = client.clone();
                let url = format!("{}/wait", server.uri());
                async move {
                    client
                        .post(url)
                        .with_extension(IdempotencyKey::new("after-up"))
                        .send()
                        .await
                }
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
            let mut conn = redis.conn();
            seen = !keys(&mut conn, "rbp-lazy:lease:*").is_empty();
            let r = waiting.await.expect("task");
            assert_eq!(code(&r), "ok 200 OK");
            if seen {
                break;
            }
        }
        assert!(seen, "the lazy store never reached Redis");
        assert!(arrivals.at("/down").len() == 1);
    })
    .await;
}

/// A slow store never carries a task past its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_never_outlives_the_deadline() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        // A patient store: only the task's deadline can cut it short.
        let store = store(&redis, "rbp-deadline:")
            .await
            .op_timeout(Duration::from_secs(5));
        let client = client(store, policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let warm = client
            .post(format!("{}/warm", server.uri()))
            .with_extension(IdempotencyKey::new("warm"))
            .send()
            .await;
        assert_eq!(code(&warm), "ok 200 OK");
        redis.signal("-STOP");
        let t = Instant::now();
        let r = client
            .post(format!("{}/late", server.uri()))
            .with_extension(IdempotencyKey::new("late"))
            .with_extension(Deadline::after(Duration::from_millis(300)))
            .send()
            .await;
        let took = t.elapsed();
        redis.signal("-CONT");
        assert_eq!(code(&r), "deadline_exhausted");
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert_eq!(arrivals.at("/late").len(), 0);
    })
    .await;
}
