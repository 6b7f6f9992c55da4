//! GitHub as GitHub documents it, under `RateLimitHeaders::github()`, over
//! real HTTP against a GitHub-like server (`server/github.rs`): a
//! secondary-limit `403` (quota left, `retry-after`) is waited for as the
//! server's time, a primary-limit `403` (remaining 0) until its reset, and
//! a plain `403` is returned at once, never retried. Every count and time
//! is the server's.

use std::time::Duration;

use reqwest_backpressure::{Policy, RateLimitHeaders};

use crate::common::{client, report};
use crate::server::github::{Config, GitHubServer};

fn github_policy() -> Policy {
    Policy::default().rate_limit_headers(RateLimitHeaders::github())
}

#[tokio::test]
async fn a_secondary_limit_is_waited_for_and_a_plain_403_is_returned() {
    // Quota to spare; at most 10 requests a second, as a secondary limit.
    let server = GitHubServer::start(Config {
        quota: 5000,
        window_secs: 3600,
        burst: 10,
        span: Duration::from_secs(1),
        status: 403,
    })
    .await;
    let client = client(github_policy());
    let get = |path: String, task: u32| {
        let client = client.clone();
        let url = format!("{}{path}", server.uri);
        tokio::spawn(async move { client.get(url).header("x-task", task).send().await })
    };
    // Three refusals first, one at a time: each answered at once.
    for task in 100..103u32 {
        let resp = get(format!("/forbidden/{task}"), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(resp.status(), 403);
        let r = report(&resp);
        // A plain answer: one attempt, nothing waited for, no stop.
        assert_eq!(r.attempts(), 1, "{r:?}");
        assert_eq!(r.stop_reason(), None);
        assert_eq!(r.retry_at(), None);
        assert_eq!(r.hint_source(), None);
    }
    // Then a burst of 40, with three more refusals among them.
    let issues: Vec<_> = (0..40u32)
        .map(|task| get("/repos/o/r/issues".into(), task))
        .collect();
    let refusals: Vec<_> = (103..106u32)
        .map(|task| get(format!("/forbidden/{task}"), task))
        .collect();

    let mut failed = 0;
    let mut waited_for_retry_after = 0;
    for t in issues {
        let resp = t.await.unwrap().unwrap();
        let r = report(&resp);
        if resp.status() != 200 {
            failed += 1;
            eprintln!("failed: {} {r:?}", resp.status());
        }
        assert_eq!(r.stop_reason(), None, "{r:?}");
        if r.attempts() > 1 {
            assert_eq!(r.hint_source().map(|s| s.code()), Some("retry_after"));
            waited_for_retry_after += 1;
        }
    }
    let mut refused_attempts = Vec::new();
    for (task, t) in (103..106u32).zip(refusals) {
        let resp = t.await.unwrap().unwrap();
        assert_eq!(resp.status(), 403);
        let r = report(&resp);
        assert_eq!(r.stop_reason(), None, "{r:?}");
        refused_attempts.push((task, r.attempts()));
    }
    let seen = server.finish();
    let mut twice: Vec<_> = seen
        .tasks
        .iter()
        .filter(|(_, t)| t.limited > 1)
        .map(|(i, t)| (*i, t.limited))
        .collect();
    twice.sort_unstable();
    eprintln!(
        "github: {} requests, {} ok, {} secondary, {} primary, {} refused; \
         limited more than once: {twice:?}",
        seen.requests, seen.oks, seen.secondary, seen.primary, seen.refused
    );
    assert_eq!(failed, 0, "tasks failed on a secondary-limit answer");
    assert!(
        seen.secondary > 0,
        "the burst never met the secondary limit"
    );
    assert_eq!(seen.primary, 0);
    assert_eq!(seen.oks, 40);
    // No send before the `retry-after` its task was told.
    assert_eq!(seen.premature, 0);
    // Each task pushed back on the way to its 200 waited for it, then
    // retried.
    let limited = (0..40u32).filter(|t| seen.tasks[t].limited > 0).count();
    assert_eq!(limited, waited_for_retry_after);
    // Each plain 403 was answered once, and nothing was sent after it (a
    // refusal that met the secondary limit first waited and retried it:
    // our attempts are its sends).
    assert_eq!(seen.refused, 6);
    for task in 100..106u32 {
        let record = &seen.tasks[&task];
        assert_eq!(record.refused, 1, "task {task}: {record:?}");
        assert_eq!(record.sends_after_refusal, 0, "task {task}: {record:?}");
    }
    for (task, attempts) in refused_attempts {
        assert_eq!(attempts, seen.tasks[&task].sends, "task {task}");
    }
}

#[tokio::test]
async fn a_primary_limit_403_waits_for_the_reset() {
    // 6 requests per 2-second window; no secondary limit in reach.
    let server = GitHubServer::start(Config {
        quota: 6,
        window_secs: 2,
        burst: 1000,
        span: Duration::from_secs(1),
        status: 403,
    })
    .await;
    let client = client(github_policy());
    let all = futures_util::future::join_all((0..10u32).map(|i| {
        let url = format!("{}/repos/o/r", server.uri);
        client.get(url).header("x-task", i).send()
    }))
    .await;
    let mut retried = 0u64;
    for resp in all {
        let resp = resp.unwrap();
        assert_eq!(resp.status(), 200);
        let r = report(&resp);
        assert_eq!(r.stop_reason(), None, "{r:?}");
        if r.attempts() > 1 {
            assert_eq!(r.hint_source().map(|s| s.code()), Some("ratelimit"));
            retried += 1;
        }
    }
    let seen = server.finish();
    eprintln!(
        "github primary: {} requests, {} ok, {} primary-limit answers",
        seen.requests, seen.oks, seen.primary
    );
    assert_eq!(seen.oks, 10);
    assert_eq!(seen.secondary, 0);
    // No send before the reset its task was told.
    assert_eq!(seen.premature, 0);
    // Every primary-limit answer was retried once, at the reset.
    assert_eq!(seen.primary, retried);
}

#[tokio::test]
async fn a_secondary_limit_429_is_waited_for_too() {
    // GitHub sends `429` as well: the same rules.
    let server = GitHubServer::start(Config {
        quota: 5000,
        window_secs: 3600,
        burst: 2,
        span: Duration::from_secs(1),
        status: 429,
    })
    .await;
    // Even with `429` out of the policy's own statuses: the preset
    // declares it.
    let client = client(github_policy().statuses([http::StatusCode::SERVICE_UNAVAILABLE]));
    let all = futures_util::future::join_all((0..4u32).map(|i| {
        let url = format!("{}/user", server.uri);
        client.get(url).header("x-task", i).send()
    }))
    .await;
    for resp in all {
        let resp = resp.unwrap();
        assert_eq!(resp.status(), 200, "{:?}", report(&resp));
    }
    let seen = server.finish();
    assert!(seen.secondary > 0);
    assert_eq!(seen.premature, 0);
    assert_eq!(seen.oks, 4);
}
