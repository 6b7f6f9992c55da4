//! The checks that a store keeps each scope's limit apart: a limit is one
//! [`OriginState`] under one key, `scheme://host:port` for the origin's own
//! and `scheme://host:port#scope` for a scope's (a GitHub resource, a
//! Discord bucket, an IETF partition, a declared scope). A store that
//! mapped the key to something coarser (the origin alone, the scope
//! alone, a name the scope's characters break) would let one scope's
//! pushback, quota or pace hold another, and fails here.

use std::collections::HashMap;
use std::time::Duration;

use tokio::task::JoinSet;

use super::{OrFail, PACING, admit, sends};
use crate::origin::{Admission, ORIGIN_IDLE, Outcome, PacingConfig};
use crate::scope::key::limit_key;
use crate::store::Store;

/// A pushback in one scope closes that scope's gate alone, as another
/// handle reads it: not its origin's, not another scope's, not the same
/// scope of another origin; and a pushback of the origin closes the
/// origin's gate alone.
pub async fn scope_gates_hold_apart<S: Store + Clone>(store: S) {
    let o = "http://conformance-scope-gate.test:80";
    let (a, b) = (limit_key(o, Some("a")), limit_key(o, Some("b")));
    let elsewhere = limit_key("http://conformance-scope-gate-2.test:80", Some("a"));
    let other = store.clone();
    let back = |secs| Outcome::Pushback {
        retry_in: Some(Duration::from_secs(secs)),
        hold_at_least: None,
    };
    store.record(&a, PACING, back(5)).await.or_fail("record");
    let gate = other.gate(&a).await.or_fail("gate");
    assert!(
        gate.is_some_and(|g| g > Duration::from_secs(4) && g <= Duration::from_secs(5)),
        "the other handle reads scope a's gate as {gate:?}"
    );
    for key in [o, b.as_str(), elsewhere.as_str()] {
        let gate = other.gate(key).await.or_fail("gate");
        assert_eq!(gate, None, "{key:?} held by a pushback in {a:?}");
        let admission = admit(&other, key).await;
        assert!(
            matches!(admission, Admission::Now),
            "{key:?} admitted {admission:?} while only {a:?} is held"
        );
    }
    let admission = admit(&other, &a).await;
    assert!(
        matches!(admission, Admission::GateClosed(_)),
        "scope a admitted {admission:?} through its closed gate"
    );
    store.record(o, PACING, back(3)).await.or_fail("record");
    let gate = other.gate(o).await.or_fail("gate");
    assert!(
        gate.is_some_and(|g| g > Duration::from_secs(2) && g <= Duration::from_secs(3)),
        "the origin's gate reads {gate:?} after its pushback"
    );
    assert_eq!(other.gate(&b).await.or_fail("gate"), None, "scope b held");
    let gate = other.gate(&a).await.or_fail("gate");
    assert!(
        gate.is_some_and(|g| g > Duration::from_secs(3)),
        "the origin's 3 s replaced scope a's 5 s: {gate:?}"
    );
}

/// An origin and two of its scopes, each stated its own quota (4, 5 and 3
/// left), each answer recorded as the middleware records it: many
/// admissions at once, interleaved over the three, spend each quota once
/// and apart.
pub async fn scope_quotas_are_spent_apart<S: Store + Clone>(store: S) {
    let o = "http://conformance-scope-quota.test:80";
    let (a, b) = (limit_key(o, Some("a")), limit_key(o, Some("b")));
    let limits = [(o.to_owned(), 4), (a, 5), (b, 3)];
    for (key, remaining) in &limits {
        let quota = Outcome::Quota {
            remaining: *remaining,
            reset_in: Duration::from_secs(5),
            limit: None,
            window: None,
            sent_ago: Duration::ZERO,
            tokens: None,
        };
        store.record(key, PACING, quota).await.or_fail("record");
    }
    let keys: Vec<&str> = limits.iter().map(|(k, _)| k.as_str()).collect();
    let admissions = admit_many(&store, &keys, 16).await;
    for (key, remaining) in &limits {
        let of = admissions.get(key).map(Vec::as_slice).unwrap_or_default();
        let through = of.iter().filter(|a| sends(a)).count();
        let held = of
            .iter()
            .filter(|a| matches!(a, Admission::QuotaHeld(_)))
            .count();
        assert_eq!(
            (through, held),
            (*remaining as usize, 1),
            "{key:?}, stated {remaining} left: {through} through, {held} told it is spent: {of:?}"
        );
    }
}

/// A pace learned in one scope (10 per 300 ms) is that scope's alone:
/// once its gate reopens, admissions at once leave 10 in its first period,
/// while its origin and another scope (which admitted everything) send
/// every one at once.
pub async fn scope_paces_are_learned_apart<S: Store + Clone>(store: S) {
    let o = "http://conformance-scope-pace.test:80";
    let (a, b) = (limit_key(o, Some("a")), limit_key(o, Some("b")));
    let batch = 10;
    let period = Duration::from_millis(300);
    for _ in 0..batch {
        for key in [o, a.as_str(), b.as_str()] {
            store
                .record(key, PACING, Outcome::Admitted)
                .await
                .or_fail("record");
        }
    }
    let back = Outcome::Pushback {
        retry_in: Some(period),
        hold_at_least: None,
    };
    let closed = store.record(&a, PACING, back).await.or_fail("record");
    assert!(closed.is_some(), "a pushback closed no gate");
    let give_up = tokio::time::Instant::now() + Duration::from_secs(5);
    while store.gate(&a).await.or_fail("gate").is_some() {
        assert!(
            tokio::time::Instant::now() < give_up,
            "the gate never reopened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let admissions = admit_many(&store, &[o, a.as_str(), b.as_str()], 3 * batch).await;
    for key in [o, b.as_str()] {
        let of = admissions.get(key).map(Vec::as_slice).unwrap_or_default();
        let at_once = of.iter().filter(|a| matches!(a, Admission::Now)).count();
        assert_eq!(
            at_once,
            3 * batch,
            "{key:?} paced by the pace of {a:?}: {of:?}"
        );
    }
    let of = admissions.get(&a).map(Vec::as_slice).unwrap_or_default();
    super::assert_first_batch(of, period, batch, &format!("{a:?}"));
}

/// Scopes named by hostile servers (long, with `#`, spaces, newlines,
/// braces, glob characters, no name at all), each key as the middleware
/// cleans and bounds it: each is a limit of its own, told apart by a gate
/// of its own length; the origin's own stays open.
pub async fn hostile_scope_names_make_keys_of_their_own<S: Store>(store: S) {
    let o = "http://conformance-scope-names.test:80";
    let names = [
        "é#x y\n".repeat(40),
        "x".repeat(1_000),
        "{tag}".to_owned(),
        "}{".to_owned(),
        "origin:{x}:y".to_owned(),
        "*?[a-z]".to_owned(),
        "a b\tc\r\n".to_owned(),
        "#".to_owned(),
        String::new(),
        "ünï".to_owned(),
    ];
    let keys: Vec<String> = names.iter().map(|n| limit_key(o, Some(n))).collect();
    for (i, key) in keys.iter().enumerate() {
        assert!(
            !keys[i + 1..].contains(key),
            "the check's names meet in one key {key:?}"
        );
    }
    for (i, key) in keys.iter().enumerate() {
        let back = Outcome::Pushback {
            retry_in: Some(seconds(i)),
            hold_at_least: None,
        };
        store.record(key, PACING, back).await.or_fail("record");
    }
    for (i, key) in keys.iter().enumerate() {
        let gate = store.gate(key).await.or_fail("gate");
        assert!(
            gate.is_some_and(|g| g > seconds(i) - Duration::from_secs(1) && g <= seconds(i)),
            "{key:?} reads a gate of {gate:?}, not its own {:?}",
            seconds(i)
        );
    }
    assert_eq!(
        store.gate(o).await.or_fail("gate"),
        None,
        "the origin's own gate closed by its scopes"
    );
}

/// A scope unused for the idle time is forgotten as an origin is; one
/// still held (a gate closed beyond it), or admitted since, is kept.
///
/// Not in [`run_all`](super::run_all): it sleeps past the idle time (five
/// minutes), so it runs on tokio's paused clock
/// (`#[tokio::test(start_paused = true)]`, where the sleep passes at
/// once), against a store that keeps time on it, as [`MemoryStore`](crate::MemoryStore)
/// does. After the sleep it writes 2,048 other origins: a store that sweeps
/// as it grows sweeps then. (A store whose keys expire on another clock,
/// as Redis's TTLs do, is checked by reading the TTLs.)
pub async fn idle_scopes_are_forgotten_as_origins_are<S: Store>(store: S) {
    let o = "http://conformance-scope-idle.test:80";
    let idle = limit_key(o, Some("idle"));
    let held = limit_key(o, Some("held"));
    let busy = limit_key(o, Some("busy"));
    let hold = ORIGIN_IDLE * 2;
    let long_gate = PacingConfig {
        max_gate: hold,
        ..PACING
    };
    for key in [o, idle.as_str(), busy.as_str()] {
        store
            .record(key, PACING, Outcome::Admitted)
            .await
            .or_fail("record");
    }
    let back = Outcome::Pushback {
        retry_in: Some(hold),
        hold_at_least: None,
    };
    store.record(&held, long_gate, back).await.or_fail("record");
    tokio::time::sleep(ORIGIN_IDLE + Duration::from_secs(1)).await;
    // Used as a task uses it: admitted (an update, where an answer that
    // only adds a success may be counted and written later).
    let admission = admit(&store, &busy).await;
    assert!(sends(&admission), "{busy:?} admitted {admission:?}");
    for i in 0..2_048 {
        let other = format!("http://conformance-scope-idle-{i}.test:80");
        store
            .record(&other, PACING, Outcome::Admitted)
            .await
            .or_fail("record");
    }
    for key in [o, idle.as_str()] {
        let (state, _) = store.read_origin(key).await.or_fail("read");
        assert_eq!(state, None, "{key:?} kept after the idle time");
    }
    let gate = store.gate(&held).await.or_fail("gate");
    assert!(
        gate.is_some_and(|g| g > hold - ORIGIN_IDLE - Duration::from_secs(30)),
        "a scope held beyond the idle time reads {gate:?}"
    );
    let (state, _) = store.read_origin(&busy).await.or_fail("read");
    assert!(
        state.is_some(),
        "a scope used after the idle time forgotten"
    );
}

/// `i + 1` seconds.
fn seconds(i: usize) -> Duration {
    Duration::from_secs(u64::try_from(i).unwrap_or(u64::MAX).saturating_add(1))
}

/// `n` admissions to each of `keys`, all at once (interleaved); their
/// answers by key.
async fn admit_many<S: Store + Clone>(
    store: &S,
    keys: &[&str],
    n: usize,
) -> HashMap<String, Vec<Admission>> {
    let mut tasks = JoinSet::new();
    for _ in 0..n {
        for key in keys {
            let (store, key) = (store.clone(), (*key).to_owned());
            tasks.spawn(async move {
                let admission = admit(&store, &key).await;
                (key, admission)
            });
        }
    }
    let mut out: HashMap<String, Vec<Admission>> = HashMap::new();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((key, admission)) => out.entry(key).or_default().push(admission),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    out
}
