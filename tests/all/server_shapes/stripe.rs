//! The Stripe-like server judged at fixed instants (no socket, no sleep):
//! test mode's token bucket of 25 a second, then an object's lock.

use std::time::{Duration, Instant};

use crate::server::stripe::{StripeAnswer, StripeConfig, StripeState, customer_path};
use crate::server::wire::{Judge, Reply, Seen};

fn update(s: &mut StripeState, customer: &str, at: Instant) -> Reply {
    let path = customer_path(customer);
    let seen = Seen {
        method: "POST",
        path: &path,
        task: None,
        headers: &[("idempotency-key", "k-1")],
    };
    s.judge(&seen, at, Duration::ZERO)
}

fn code(r: &Reply) -> (u16, Option<&str>, Option<&str>) {
    let code = ["rate_limit", "lock_timeout", "request_refused"]
        .into_iter()
        .find(|c| r.body.contains(&format!(r#""code":"{c}""#)));
    (r.status, code, r.get("stripe-should-retry"))
}

#[test]
fn a_burst_of_25_then_one_token_every_40_ms() {
    let mut s = StripeState::new(StripeConfig::test_mode(Duration::from_millis(100)));
    let t0 = Instant::now();
    for i in 0..25 {
        let r = update(&mut s, &format!("cus_{i}"), t0);
        assert_eq!(r.body, format!(r#"{{"id":"cus_{i}","object":"customer"}}"#));
    }
    let limited = update(&mut s, "cus_25", t0);
    assert_eq!(code(&limited), (429, Some("rate_limit"), None));
    assert_eq!(limited.get("retry-after"), None, "Stripe states no time");
    let t = t0 + Duration::from_millis(40);
    assert_eq!(update(&mut s, "cus_25", t).status, 200);
    assert_eq!(code(&update(&mut s, "cus_26", t)).1, Some("rate_limit"));
    assert_eq!(s.count(StripeAnswer::Updated), 26);
    assert_eq!(s.arrivals.idempotency_keys()[0].as_deref(), Some("k-1"));
}

#[test]
fn an_update_of_a_locked_object_times_out_and_may_be_retried() {
    let mut s = StripeState::new(StripeConfig {
        refused: Some("cus_no"),
        ..StripeConfig::test_mode(Duration::from_millis(100))
    });
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    assert_eq!(update(&mut s, "cus_a", t0).status, 200);
    let busy = update(&mut s, "cus_a", ms(50));
    assert_eq!(code(&busy), (429, Some("lock_timeout"), Some("true")));
    // The lock is the first update's: 100 ms from its arrival.
    assert_eq!(update(&mut s, "cus_a", ms(100)).status, 200);
    let refused = update(&mut s, "cus_no", ms(100));
    assert_eq!(
        code(&refused),
        (429, Some("request_refused"), Some("false"))
    );
    let get = Seen {
        method: "GET",
        path: "/v1/customers/cus_a",
        task: None,
        headers: &[],
    };
    assert_eq!(s.judge(&get, ms(200), Duration::ZERO), Reply::new(404));
    assert_eq!(s.answers.len(), 4, "a 404 is not recorded");
}
