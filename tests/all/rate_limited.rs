//! Rate-limit headers over real HTTP (wiremock on loopback): a pushback
//! that carries only a `RateLimit` reset, `Retry-After` winning over it,
//! GitHub's 403, the proactive gate on a `200` with `r=0`, and a server that
//! answers `Retry-After: 0` inside a closed window (as Flask-Limiter and
//! tower-governor do). Arrival times are taken on the server's side.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::Response;
use reqwest_backpressure::{Policy, RateLimitHeaders, RetryAfterMiddleware, RetryReport};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers with `script(i, now)` for the `i`-th request, noting arrivals.
struct Scripted<F> {
    seen: Arc<Mutex<Vec<Instant>>>,
    script: F,
}

impl<F> Respond for Scripted<F>
where
    F: Fn(usize) -> ResponseTemplate + Send + Sync,
{
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let i = {
            let mut seen = self.seen.lock().unwrap();
            seen.push(Instant::now());
            seen.len() - 1
        };
        (self.script)(i)
    }
}

async fn serve<F>(script: F) -> (MockServer, Arc<Mutex<Vec<Instant>>>)
where
    F: Fn(usize) -> ResponseTemplate + Send + Sync + 'static,
{
    let server = MockServer::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    Mock::given(any())
        .respond_with(Scripted {
            seen: seen.clone(),
            script,
        })
        .mount(&server)
        .await;
    (server, seen)
}

fn client(policy: Policy) -> ClientWithMiddleware {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    ClientBuilder::new(http)
        .with(RetryAfterMiddleware::new(policy.jitter(Duration::ZERO)))
        .build()
}

fn report(r: &Response) -> RetryReport {
    *r.extensions().get::<RetryReport>().unwrap()
}

fn gap(seen: &Arc<Mutex<Vec<Instant>>>, a: usize, b: usize) -> Duration {
    let seen = seen.lock().unwrap();
    seen[b] - seen[a]
}

#[tokio::test]
async fn a_429_with_only_a_ratelimit_reset_waits_for_it() {
    let (server, seen) = serve(|i| match i {
        0 => ResponseTemplate::new(429).insert_header("RateLimit", r#""x";r=0;t=2"#),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let resp = client(Policy::default())
        .get(server.uri())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let r = report(&resp);
    assert_eq!(r.attempts(), 2);
    assert_eq!(r.hint_source().map(|s| s.code()), Some("ratelimit"));
    assert!(gap(&seen, 0, 1) >= Duration::from_millis(1950));
}

#[tokio::test]
async fn retry_after_wins_over_a_ratelimit_reset() {
    let (server, seen) = serve(|i| match i {
        0 => ResponseTemplate::new(429)
            .insert_header("Retry-After", "1")
            .insert_header("RateLimit", r#""x";r=0;t=4"#),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let resp = client(Policy::default())
        .get(server.uri())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        report(&resp).hint_source().map(|s| s.code()),
        Some("retry_after")
    );
    let g = gap(&seen, 0, 1);
    assert!(g >= Duration::from_millis(950), "{g:?}");
    assert!(
        g < Duration::from_millis(3000),
        "{g:?}: waited for the reset"
    );
}

fn epoch_in(d: Duration) -> String {
    (SystemTime::now() + d)
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string()
}

#[tokio::test]
async fn a_github_403_with_remaining_zero_is_retried_at_the_reset() {
    let (server, seen) = serve(|i| match i {
        0 => ResponseTemplate::new(403)
            .insert_header("x-ratelimit-remaining", "0")
            .insert_header(
                "x-ratelimit-reset",
                epoch_in(Duration::from_secs(3)).as_str(),
            ),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let sent = SystemTime::now();
    let resp = client(Policy::default().rate_limit_headers(RateLimitHeaders::github()))
        .get(server.uri())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(report(&resp).attempts(), 2);
    // The reset is a whole epoch second 2–3 s after the first answer.
    let g = gap(&seen, 0, 1);
    assert!(g >= Duration::from_millis(1900), "{g:?}");
    assert!(sent.elapsed().unwrap() >= Duration::from_secs(2));
}

#[tokio::test]
async fn a_plain_403_is_never_retried() {
    let (server, seen) = serve(|_| {
        ResponseTemplate::new(403)
            .insert_header("x-ratelimit-remaining", "12")
            .insert_header(
                "x-ratelimit-reset",
                epoch_in(Duration::from_secs(3)).as_str(),
            )
    })
    .await;
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::github());
    let client = client(policy);
    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(report(&resp).stop_reason(), None);
    // Nor a 403 without any rate-limit header.
    let (bare, bare_seen) = serve(|_| ResponseTemplate::new(403)).await;
    let resp = client.get(bare.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(bare_seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_200_with_an_exhausted_quota_holds_the_next_request() {
    let (server, seen) = serve(|i| match i {
        0 => ResponseTemplate::new(200).insert_header("RateLimit", r#""burst";r=0;t=2"#),
        // The server would refuse anything sent within its window.
        1 => ResponseTemplate::new(200).insert_header("RateLimit", r#""burst";r=9;t=60"#),
        _ => ResponseTemplate::new(500),
    })
    .await;
    let client = client(Policy::default());
    let first = client.get(server.uri()).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let second = client.get(server.uri()).send().await.unwrap();
    assert_eq!(second.status(), 200);
    assert_eq!(report(&second).attempts(), 1);
    assert!(report(&second).waited() >= Duration::from_millis(1900));
    assert!(gap(&seen, 0, 1) >= Duration::from_millis(1950));
}

#[tokio::test]
async fn the_proactive_gate_can_be_turned_off() {
    let (server, seen) =
        serve(|_| ResponseTemplate::new(200).insert_header("RateLimit", r#""burst";r=0;t=2"#))
            .await;
    let client = client(Policy::default().proactive_gate(false));
    client.get(server.uri()).send().await.unwrap();
    client.get(server.uri()).send().await.unwrap();
    assert!(gap(&seen, 0, 1) < Duration::from_millis(1000));
}

/// A fixed window of `cap` requests per second that starts at the first
/// request (not on a clock second), answering `Retry-After` truncated to
/// whole seconds, so `0` for the whole rest of a closed window, the way
/// Flask-Limiter does.
struct TruncatingWindow {
    cap: u32,
    state: Mutex<(Option<Instant>, u32, u32, u32)>, // window start, admitted in it, 200s, 429s
}

impl Respond for TruncatingWindow {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let now = Instant::now();
        let mut s = self.state.lock().unwrap();
        let start = match s.0 {
            Some(start) if now - start < Duration::from_secs(1) => start,
            _ => {
                s.0 = Some(now);
                s.1 = 0;
                now
            }
        };
        if s.1 < self.cap {
            s.1 += 1;
            s.2 += 1;
            return ResponseTemplate::new(200);
        }
        s.3 += 1;
        let left = Duration::from_secs(1).saturating_sub(now - start);
        ResponseTemplate::new(429).insert_header("Retry-After", left.as_secs().to_string().as_str())
    }
}

#[tokio::test]
async fn a_burst_against_retry_after_zero_in_a_closed_window_all_gets_through() {
    let server = MockServer::start().await;
    let limiter = Arc::new(TruncatingWindow {
        cap: 20,
        state: Mutex::new((None, 0, 0, 0)),
    });
    struct Shared(Arc<TruncatingWindow>);
    impl Respond for Shared {
        fn respond(&self, r: &Request) -> ResponseTemplate {
            self.0.respond(r)
        }
    }
    Mock::given(any())
        .respond_with(Shared(limiter.clone()))
        .mount(&server)
        .await;
    // Default policy (jitter on): 80 tasks, 20 per window.
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let client = ClientBuilder::new(http)
        .with(RetryAfterMiddleware::new(Policy::default()))
        .build();
    let tasks = (0..80).map(|_| {
        let client = client.clone();
        let url = server.uri();
        tokio::spawn(async move { client.get(url).send().await })
    });
    let mut ok = 0;
    for t in tasks {
        let resp = t.await.unwrap().unwrap();
        if resp.status() == 200 {
            ok += 1;
        } else {
            eprintln!("failed: {:?}", report(&resp));
        }
    }
    let (_, _, admitted, rejected) = *limiter.state.lock().unwrap();
    eprintln!("truncating window: {ok}/80 ok, {rejected} 429s");
    assert_eq!(ok, 80, "{rejected} 429s");
    assert_eq!(admitted, 80);
    // The burst's first 60 rejections, and a few probes: not every task's
    // three attempts burnt into closed windows.
    assert!(rejected < 120, "{rejected} 429s");
}

/// The window index, the requests admitted in it, and every (arrival, status).
type QuotaLog = (u64, u32, Vec<(Instant, u16)>);

/// A fixed window of `cap` requests per 2 s that states its quota on every
/// answer (`RateLimit: "w";r=<left>;t=<seconds to reset>`), and answers a
/// request over it `429` with `Retry-After`.
struct StatedQuota {
    cap: u32,
    start: Instant,
    state: Mutex<QuotaLog>,
}

impl Respond for StatedQuota {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let now = Instant::now();
        let window = Duration::from_secs(2);
        let index = (now - self.start).as_millis() as u64 / window.as_millis() as u64;
        let reset = window - Duration::from_millis((now - self.start).as_millis() as u64 % 2_000);
        let t = reset.as_secs() + u64::from(reset.subsec_nanos() > 0);
        let mut s = self.state.lock().unwrap();
        if s.0 != index {
            s.0 = index;
            s.1 = 0;
        }
        if s.1 < self.cap {
            s.1 += 1;
            s.2.push((now, 200));
            let left = self.cap - s.1;
            return ResponseTemplate::new(200)
                .insert_header("RateLimit", format!(r#""w";r={left};t={t}"#).as_str());
        }
        s.2.push((now, 429));
        ResponseTemplate::new(429).insert_header("Retry-After", t.to_string().as_str())
    }
}

#[tokio::test]
async fn a_stated_quota_paces_concurrent_requests_before_any_429() {
    let server = MockServer::start().await;
    let limiter = Arc::new(StatedQuota {
        cap: 5,
        start: Instant::now(),
        state: Mutex::new((0, 0, Vec::new())),
    });
    struct Shared(Arc<StatedQuota>);
    impl Respond for Shared {
        fn respond(&self, r: &Request) -> ResponseTemplate {
            self.0.respond(r)
        }
    }
    Mock::given(any())
        .respond_with(Shared(limiter.clone()))
        .mount(&server)
        .await;
    let client = client(Policy::default());
    // One request learns the quota (4 left in this window) ...
    assert_eq!(client.get(server.uri()).send().await.unwrap().status(), 200);
    // ... so of ten sent at once, four go now and six wait for the reset.
    let all =
        futures_util::future::join_all((0..10).map(|_| client.get(server.uri()).send())).await;
    for r in all {
        assert_eq!(r.unwrap().status(), 200);
    }
    let seen = limiter.state.lock().unwrap().2.clone();
    let rejected = seen.iter().filter(|(_, s)| *s == 429).count();
    assert_eq!(rejected, 0, "{seen:?}");
    assert_eq!(seen.len(), 11);
}
