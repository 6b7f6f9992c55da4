//! Rate-limit headers over real HTTP (wiremock on loopback): a pushback
//! that carries only a `RateLimit` reset, `Retry-After` winning over it,
//! GitHub's 403s (primary and secondary limits, and a plain one; a whole
//! GitHub-like server is in `github.rs`), the proactive gate on a `200` with
//! `r=0`, and a server that
//! answers `Retry-After: 0` inside a closed window (as Flask-Limiter and
//! tower-governor do). Arrival times are taken on the server's side.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest_backpressure::{Policy, RateLimitHeaders};
use wiremock::ResponseTemplate;

use crate::common::{client, exact, report, scripted, spawn_tasks};
use crate::server::{LimitedServer, Shape};

#[tokio::test]
async fn a_429_with_only_a_ratelimit_reset_waits_for_it() {
    let (server, seen) = scripted(|_, i| match i {
        0 => ResponseTemplate::new(429).insert_header("RateLimit", r#""x";r=0;t=2"#),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let resp = client(exact()).get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let r = report(&resp);
    assert_eq!(r.attempts(), 2);
    assert_eq!(r.hint_source().map(|s| s.code()), Some("ratelimit"));
    assert!(seen.first_gap() >= Duration::from_millis(1950));
}

#[tokio::test]
async fn retry_after_wins_over_a_ratelimit_reset() {
    let (server, seen) = scripted(|_, i| match i {
        0 => ResponseTemplate::new(429)
            .insert_header("Retry-After", "1")
            .insert_header("RateLimit", r#""x";r=0;t=4"#),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let resp = client(exact()).get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        report(&resp).hint_source().map(|s| s.code()),
        Some("retry_after")
    );
    let g = seen.first_gap();
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
    let (server, seen) = scripted(|_, i| match i {
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
    let resp = client(exact().rate_limit_headers(RateLimitHeaders::github()))
        .get(server.uri())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(report(&resp).attempts(), 2);
    // The reset is a whole epoch second 2–3 s after the first answer.
    let g = seen.first_gap();
    assert!(g >= Duration::from_millis(1900), "{g:?}");
    assert!(sent.elapsed().unwrap() >= Duration::from_secs(2));
}

#[tokio::test]
async fn a_plain_403_is_never_retried() {
    let (server, seen) = scripted(|_, _| {
        ResponseTemplate::new(403)
            .insert_header("x-ratelimit-remaining", "12")
            .insert_header(
                "x-ratelimit-reset",
                epoch_in(Duration::from_secs(3)).as_str(),
            )
    })
    .await;
    let policy = exact().rate_limit_headers(RateLimitHeaders::github());
    let client = client(policy);
    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(report(&resp).stop_reason(), None);
    // Nor a 403 without any rate-limit header.
    let (bare, bare_seen) = scripted(|_, _| ResponseTemplate::new(403)).await;
    let resp = client.get(bare.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(seen.len(), 1);
    assert_eq!(bare_seen.len(), 1);
}

#[tokio::test]
async fn an_epoch_reset_is_measured_against_the_answers_date() {
    // The server's clock is 10 s behind ours: its reset, 2 s after its
    // `Date`, is already past on our clock.
    let server_now = SystemTime::now() - Duration::from_secs(10);
    let date = httpdate::fmt_http_date(server_now);
    let secs = server_now.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let reset = (secs + 2).to_string();
    let (server, seen) = scripted(move |_, i| match i {
        0 => ResponseTemplate::new(403)
            .insert_header("Date", date.as_str())
            .insert_header("x-ratelimit-remaining", "0")
            .insert_header("x-ratelimit-reset", reset.as_str()),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let resp = client(exact().rate_limit_headers(RateLimitHeaders::github()))
        .get(server.uri())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(report(&resp).attempts(), 2);
    let g = seen.first_gap();
    assert!(g >= Duration::from_secs(2), "{g:?}: left before the reset");
    assert!(g < Duration::from_millis(3500), "{g:?}");
}

#[tokio::test]
async fn a_github_403_whose_reset_has_passed_is_retried_through_the_gate() {
    let policy = exact().rate_limit_headers(RateLimitHeaders::github());
    // Exhausted, but the reset is past: a pushback with no usable time.
    // It closes the origin's gate for a hold of ours (a second; after the
    // probe is rejected too, a fifth of one), and the task retries
    // through it until its attempts are spent: its last one a second
    // further back, behind any queue (there is none here).
    let (past, past_seen) = scripted(|_, _| {
        ResponseTemplate::new(403)
            .insert_header("x-ratelimit-remaining", "0")
            .insert_header("x-ratelimit-reset", "1600000000")
    })
    .await;
    let resp = client(policy.clone()).get(past.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let r = report(&resp);
    assert_eq!(
        r.stop_reason().map(|r| r.code()),
        Some("attempt_budget_exhausted")
    );
    assert_eq!(r.attempts(), 3);
    assert_eq!(r.retry_at(), None, "no server time to report");
    let at = past_seen.all();
    assert_eq!(at.len(), 3);
    let (first, second) = (at[1] - at[0], at[2] - at[1]);
    assert!(first >= Duration::from_millis(990), "{at:?}");
    assert!(
        second >= Duration::from_millis(1190),
        "{at:?}: the probe's hold, and a second behind for the last attempt"
    );
    assert!(second < Duration::from_millis(2000), "{at:?}");
    // Quota left and an invalid `Retry-After`: not a pushback, never
    // guessed into one.
    let (left, left_seen) = scripted(|_, _| {
        ResponseTemplate::new(403)
            .insert_header("x-ratelimit-remaining", "12")
            .insert_header("Retry-After", "1.5")
    })
    .await;
    let resp = client(policy).get(left.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let r = report(&resp);
    assert_eq!(
        (r.attempts(), r.stop_reason(), r.retry_at()),
        (1, None, None)
    );
    assert_eq!(left_seen.len(), 1);
}

/// GitHub's secondary rate limit: quota left, and a `retry-after`.
fn secondary_limit(retry_after: &str) -> ResponseTemplate {
    ResponseTemplate::new(403)
        .insert_header("x-ratelimit-limit", "5000")
        .insert_header("x-ratelimit-remaining", "4987")
        .insert_header(
            "x-ratelimit-reset",
            epoch_in(Duration::from_secs(3000)).as_str(),
        )
        .insert_header("retry-after", retry_after)
}

#[tokio::test]
async fn a_github_secondary_limit_403_waits_for_its_retry_after() {
    let (server, seen) = scripted(|_, i| match i {
        0 => secondary_limit("1"),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let resp = client(exact().rate_limit_headers(RateLimitHeaders::github()))
        .get(server.uri())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let r = report(&resp);
    assert_eq!(r.attempts(), 2);
    assert_eq!(r.stop_reason(), None);
    assert_eq!(r.hint_source().map(|s| s.code()), Some("retry_after"));
    let g = seen.first_gap();
    assert!(
        g >= Duration::from_secs(1),
        "{g:?}: sent before retry-after"
    );
    assert!(g < Duration::from_secs(3), "{g:?}");
}

#[tokio::test]
async fn a_github_secondary_limit_403_closes_the_origins_gate() {
    // The task that met it stops at once (one attempt allowed) and says
    // why; the next request to the origin waits out the `retry-after`.
    let (server, seen) = scripted(|path, _| match path {
        "/a" => secondary_limit("1"),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let policy = exact()
        .rate_limit_headers(RateLimitHeaders::github())
        .max_attempts(1);
    let client = client(policy);
    let resp = client
        .get(format!("{}/a", server.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let r = report(&resp);
    assert_eq!(r.attempts(), 1);
    assert_eq!(
        r.stop_reason().map(|s| s.code()),
        Some("attempt_budget_exhausted")
    );
    // When GitHub takes requests again.
    assert!(r.retry_at().is_some());
    let other = client
        .get(format!("{}/b", server.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    assert_eq!(report(&other).attempts(), 1);
    let g = seen.first_gap();
    assert!(
        g >= Duration::from_secs(1),
        "{g:?}: the gate let it through"
    );
}

#[tokio::test]
async fn a_github_secondary_limit_past_max_wait_stops_with_its_code() {
    let (server, seen) = scripted(|_, _| secondary_limit("120")).await;
    let before = SystemTime::now();
    let resp = client(exact().rate_limit_headers(RateLimitHeaders::github()))
        .get(server.uri())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let r = report(&resp);
    assert_eq!(r.attempts(), 1);
    assert_eq!(
        r.stop_reason().map(|s| s.code()),
        Some("wait_budget_exhausted")
    );
    assert_eq!(r.hint_source().map(|s| s.code()), Some("retry_after"));
    // The caller is told when GitHub takes requests again.
    let at = r.retry_at().expect("the server's time");
    assert!(at >= before + Duration::from_secs(120), "{at:?}");
    assert_eq!(seen.len(), 1);
}

#[tokio::test]
async fn a_403_with_retry_after_is_plain_unless_declared_so() {
    // The default headers declare no status; `pushback_status` declares
    // one for an exhausted quota only: a `Retry-After` alone makes neither
    // a pushback.
    let exhausted_only = RateLimitHeaders::none()
        .reset_header(
            http::HeaderName::from_static("x-ratelimit-reset"),
            reqwest_backpressure::ResetFormat::EpochSeconds,
            Some(http::HeaderName::from_static("x-ratelimit-remaining")),
        )
        .pushback_status(http::StatusCode::FORBIDDEN);
    for headers in [RateLimitHeaders::ietf(), exhausted_only] {
        let (server, seen) = scripted(|_, _| secondary_limit("1")).await;
        let resp = client(exact().rate_limit_headers(headers))
            .get(server.uri())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 403);
        let r = report(&resp);
        assert_eq!(
            (r.attempts(), r.stop_reason(), r.retry_at()),
            (1, None, None)
        );
        assert_eq!(seen.len(), 1);
    }
}

#[tokio::test]
async fn a_200_with_an_exhausted_quota_holds_the_next_request() {
    let (server, seen) = scripted(|_, i| match i {
        0 => ResponseTemplate::new(200).insert_header("RateLimit", r#""burst";r=0;t=2"#),
        // The server would refuse anything sent within its window.
        1 => ResponseTemplate::new(200).insert_header("RateLimit", r#""burst";r=9;t=60"#),
        _ => ResponseTemplate::new(500),
    })
    .await;
    let client = client(exact());
    let first = client.get(server.uri()).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let second = client.get(server.uri()).send().await.unwrap();
    assert_eq!(second.status(), 200);
    assert_eq!(report(&second).attempts(), 1);
    assert!(report(&second).waited() >= Duration::from_millis(1900));
    assert!(seen.first_gap() >= Duration::from_millis(1950));
}

#[tokio::test]
async fn the_proactive_gate_can_be_turned_off() {
    let (server, seen) = scripted(|_, _| {
        ResponseTemplate::new(200).insert_header("RateLimit", r#""burst";r=0;t=2"#)
    })
    .await;
    let client = client(exact().proactive_gate(false));
    client.get(server.uri()).send().await.unwrap();
    client.get(server.uri()).send().await.unwrap();
    assert!(seen.first_gap() < Duration::from_millis(1000));
}

#[tokio::test]
async fn a_burst_against_retry_after_zero_in_a_closed_window_all_gets_through() {
    // A fixed window of 20 a second starting at a request, answering
    // `Retry-After` truncated to whole seconds: `0` for the whole rest of a
    // closed window, as Flask-Limiter does.
    let server = LimitedServer::start(Shape::TruncatedZero, 20, "/").await;
    // Default policy (jitter on): 80 tasks.
    let client = client(Policy::default());
    let tasks = spawn_tasks(&client, &server.url, 80);
    let mut ok = 0;
    for t in tasks {
        let resp = t.await.unwrap().unwrap();
        if resp.status() == 200 {
            ok += 1;
        } else {
            eprintln!("failed: {:?}", report(&resp));
        }
    }
    let seen = server.finish();
    eprintln!("truncating window: {ok}/80 ok, {} 429s", seen.rejected);
    assert_eq!(ok, 80, "{} 429s", seen.rejected);
    assert_eq!(seen.oks, 80);
    // A zero is believed once: a task whose first 429 said 0 retries at once,
    // and may land in the same closed window; the origin's second zero
    // holds it for a second, so at most the first such task does that.
    assert!(seen.premature <= 2, "{} premature", seen.premature);
    // ... and not every task's three attempts burnt into closed windows.
    assert!(seen.rejected < 120, "{} 429s", seen.rejected);
}

#[tokio::test]
async fn a_stated_quota_paces_concurrent_requests_before_any_429() {
    // 5 a second, stated on every answer (`RateLimit: ...; r=<left>; t=..`).
    let server = LimitedServer::start(Shape::RateLimitHeaders, 5, "/").await;
    let client = client(exact());
    // One request learns the quota (4 left in this window) ...
    let first = client.get(&server.url).send().await.unwrap();
    assert_eq!(first.status(), 200);
    // ... so of ten sent at once, four go now and the rest wait for the
    // next windows, without a 429.
    let all = futures_util::future::join_all((0..10).map(|_| client.get(&server.url).send())).await;
    for r in all {
        assert_eq!(r.unwrap().status(), 200);
    }
    let seen = server.finish();
    assert_eq!(seen.oks, 11);
    assert_eq!(seen.rejected, 0, "{:?}", seen.arrivals);
}
