//! The silent shapes over HTTP, against a bare reqwest client (no
//! middleware): their rejections are a bare `429` or `503`, without
//! `Retry-After` or any rate-limit field, and what they admit is checked on
//! the server's own arrival times. Timing margins are wide: each claim
//! holds however late the client's sends leave.

use std::time::Duration;

use crate::server::{Denial, LimitedServer, ServerState, Shape};

/// Sends `n` GETs of task `task` at once; returns their statuses.
async fn burst(client: &reqwest::Client, url: &str, task: u32, n: u32) -> Vec<u16> {
    let sends = (0..n).map(|_| async {
        let resp = client
            .get(url)
            .header("x-task", task)
            .send()
            .await
            .expect("the server answers");
        assert_bare(&resp);
        resp.status().as_u16()
    });
    futures_util::future::join_all(sends).await
}

/// A rejection names no time and no rate-limit field.
fn assert_bare(resp: &reqwest::Response) {
    if resp.status() == 200 {
        return;
    }
    for (name, _) in resp.headers() {
        let name = name.as_str();
        assert!(
            name != "retry-after" && !name.starts_with("ratelimit") && !name.contains("ratelimit"),
            "a silent rejection carries {name}"
        );
    }
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|&&s| s == status).count()
}

/// The server's admissions in `[from, to)` since its epoch.
fn admitted_between(seen: &ServerState, from: Duration, to: Duration) -> usize {
    seen.arrivals
        .iter()
        .filter(|a| a.ok && a.at >= from && a.at < to)
        .count()
}

#[tokio::test]
async fn leaky_bucket_over_http_answers_a_bare_status() {
    for denial in [Denial::TooManyRequests, Denial::Unavailable] {
        let cap = 5;
        let server = LimitedServer::start(Shape::Leaky(denial), cap, "/leaky").await;
        let client = reqwest::Client::new();
        let first = burst(&client, &server.url, 1, 20).await;
        // Past the level of the burst, nothing leaks back for 1.25 s after
        // the last admission: at rest again, the whole burst is admitted.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let second = burst(&client, &server.url, 2, cap + 1).await;
        let seen = server.finish();

        let status = denial.status();
        assert_eq!(count(&first, 200) + count(&first, status), 20, "{first:?}");
        assert_eq!(count(&second, 200), 6, "{second:?}");
        // The first burst: CAP + 1 at once, and no more than the bucket
        // leaked while its 20 requests arrived.
        let span = seen.arrivals[19].at - seen.arrivals[0].at;
        let leaked = (span.as_secs_f64() * f64::from(cap)).ceil() as usize;
        let ok = count(&first, 200);
        assert!(ok >= 6 && ok <= 7 + leaked, "{ok} admitted over {span:?}");
        assert_eq!(seen.oks as usize, ok + 6);
        assert_eq!(seen.rejected as usize, 20 - ok);
        assert_eq!(seen.premature, 0);
    }
}

#[tokio::test]
async fn counting_rate_over_http_keeps_a_knocking_client_denied() {
    let server =
        LimitedServer::start(Shape::Counting(Denial::TooManyRequests), 1, "/counting").await;
    let client = reqwest::Client::new();
    // Knock every 20 ms for 2.5 s: denied requests count, so the rate
    // never falls to 1 while it knocks.
    let start = tokio::time::Instant::now();
    let mut statuses = Vec::new();
    while start.elapsed() < Duration::from_millis(2500) {
        statuses.extend(burst(&client, &server.url, 1, 1).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Quiet for two whole periods: forgotten, admitted again.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let after = burst(&client, &server.url, 1, 1).await;
    let seen = server.finish();

    assert_eq!(
        statuses.first(),
        Some(&200),
        "the first request is admitted"
    );
    assert_eq!(after, [200]);
    assert_eq!(seen.rejected as usize, count(&statuses, 429));
    assert_eq!(seen.oks as usize, count(&statuses, 200) + 1);
    // While knocking at least every 400 ms, each period holds 2 requests
    // or more and opens with its first at most 400 ms in: rate ≥ 1 +
    // 2·600/1000, denied. Only a machine stalled longer proves nothing.
    let knocks = &seen.arrivals[..statuses.len()];
    let max_gap = knocks
        .windows(2)
        .map(|w| w[1].at - w[0].at)
        .max()
        .unwrap_or_default();
    let end = knocks.last().map(|a| a.at).unwrap_or_default();
    if max_gap <= Duration::from_millis(400) {
        assert_eq!(
            admitted_between(
                &seen,
                Duration::from_secs(1),
                end + Duration::from_millis(1)
            ),
            0,
            "admitted while knocking"
        );
    } else {
        eprintln!("counting rate: knocks {max_gap:?} apart, too slow to show the denial");
    }
}

#[tokio::test]
async fn outage_over_http_answers_503_until_it_recovers() {
    let down = Duration::from_millis(800);
    let server = LimitedServer::start(Shape::Outage { down }, 3, "/outage").await;
    let client = reqwest::Client::new();
    // The first request starts the server's clock: inside the outage.
    let first = burst(&client, &server.url, 1, 1).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // Up, the bucket at rest: 3 + 1 at once.
    let up = burst(&client, &server.url, 2, 4).await;
    let seen = server.finish();

    assert_eq!(first, [503]);
    assert_eq!(up, [200; 4]);
    assert!(
        seen.arrivals.iter().filter(|a| a.at < down).all(|a| !a.ok),
        "admitted during the outage"
    );
    assert_eq!(admitted_between(&seen, down, Duration::MAX), 4);
    assert_eq!(seen.premature, 0);
}
