//! The Anthropic-like server judged at fixed instants (no socket, no
//! sleep): token buckets refilled continuously, `-reset` when a bucket is
//! full again (RFC 3339), and `retry-after` in whole seconds rounded up.

use std::time::{Duration, Instant};

use crate::server::anthropic::{AnthropicConfig, AnthropicState, MESSAGES};
use crate::server::wire::{Judge, Reply, Seen};

const TOKENS: [(&str, &str); 3] = [
    ("x-input-tokens", "1000"),
    ("x-max-tokens", "500"),
    ("x-output-tokens", "100"),
];

/// A message of task 7, `at` after `t0`, the wall clock at the epoch then.
fn send(s: &mut AnthropicState, t0: Instant, at: u64) -> Reply {
    let seen = Seen {
        method: "POST",
        path: MESSAGES,
        task: Some(7),
        headers: &TOKENS,
    };
    let at = Duration::from_secs(at);
    s.judge(&seen, t0 + at, at)
}

fn requests(r: &Reply) -> (u16, Option<&str>, Option<&str>, Option<&str>) {
    (
        r.status,
        r.get("anthropic-ratelimit-requests-remaining"),
        r.get("anthropic-ratelimit-requests-reset"),
        r.get("retry-after"),
    )
}

/// 2 requests and 10,000 tokens of each kind a minute, exact remaining.
fn state() -> AnthropicState {
    AnthropicState::new(AnthropicConfig {
        round: 1,
        ..AnthropicConfig::new(Duration::from_secs(60), 2, 10_000, 10_000)
    })
}

#[test]
fn headers_state_each_bucket_and_when_it_is_full_again() {
    let mut s = state();
    let t0 = Instant::now();
    let first = send(&mut s, t0, 0);
    assert_eq!(
        requests(&first),
        (200, Some("1"), Some("1970-01-01T00:00:30.000Z"), None)
    );
    let input = ["remaining", "reset"].map(|h| {
        first
            .get(&format!("anthropic-ratelimit-input-tokens-{h}"))
            .map(str::to_owned)
    });
    assert_eq!(
        input,
        [Some("9000".into()), Some("1970-01-01T00:00:06.000Z".into())]
    );
    // 500 estimated, 100 produced: 100 output tokens spent, 0.6 s to refill.
    assert_eq!(
        first.get("anthropic-ratelimit-output-tokens-remaining"),
        Some("9900")
    );
    assert_eq!(
        first.get("anthropic-ratelimit-tokens-remaining"),
        Some("9000")
    );
}

#[test]
fn a_429_names_whole_seconds_and_spends_nothing() {
    let mut s = state();
    let t0 = Instant::now();
    assert_eq!(send(&mut s, t0, 0).status, 200);
    assert_eq!(requests(&send(&mut s, t0, 0)).1, Some("0"));
    // One request refills in 30 s: 29 s from 1 s on.
    let over = send(&mut s, t0, 1);
    assert_eq!(
        requests(&over),
        (429, Some("0"), Some("1970-01-01T00:01:00.000Z"), Some("29"))
    );
    assert!(over.body.contains("rate_limit_error"), "{}", over.body);
    assert_eq!(send(&mut s, t0, 2).status, 429, "before the time named");
    assert_eq!(send(&mut s, t0, 30).status, 200);
    assert_eq!((s.oks(), s.rejected(), s.premature()), (3, 2, 1));
    let get = Seen {
        method: "GET",
        path: MESSAGES,
        task: None,
        headers: &[],
    };
    assert_eq!(s.judge(&get, t0, Duration::ZERO), Reply::new(404));
    assert_eq!(s.log.len(), 5, "a 404 is not logged");
}
