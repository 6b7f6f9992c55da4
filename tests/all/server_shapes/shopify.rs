//! The Shopify-like server judged at fixed instants (no socket, no
//! sleep): the REST Admin API's leaky bucket of 40 leaking 2 a second,
//! stated as `used/size`, and its `429` with `Retry-After: 2.0`.

use std::time::{Duration, Instant};

use crate::server::shopify::{ShopifyAnswer, ShopifyConfig, ShopifyState};
use crate::server::wire::{Judge, Reply, Seen};

fn request(s: &mut ShopifyState, method: &str, at: Instant) -> Reply {
    let seen = Seen {
        method,
        path: "/admin/api/2024-10/products.json",
        task: None,
        headers: &[],
    };
    s.judge(&seen, at, Duration::ZERO)
}

fn fields(r: &Reply) -> (u16, Option<&str>, Option<&str>) {
    (
        r.status,
        r.get("x-shopify-shop-api-call-limit"),
        r.get("retry-after"),
    )
}

#[test]
fn a_full_bucket_throttles_until_a_request_has_leaked_out() {
    let mut s = ShopifyState::new(ShopifyConfig::STANDARD);
    let t0 = Instant::now();
    let first = request(&mut s, "GET", t0);
    assert_eq!(fields(&first), (200, Some("1/40"), None));
    for _ in 1..40 {
        assert_eq!(request(&mut s, "GET", t0).status, 200);
    }
    let over = request(&mut s, "GET", t0);
    assert_eq!(fields(&over), (429, Some("40/40"), Some("2.0")));
    assert!(
        over.body.contains("Exceeded 2 calls per second"),
        "{}",
        over.body
    );
    // 2 a second: one has leaked out 500 ms on, and the request fills it.
    let t = t0 + Duration::from_millis(500);
    assert_eq!(
        fields(&request(&mut s, "GET", t)),
        (200, Some("40/40"), None)
    );
    assert_eq!(request(&mut s, "GET", t).status, 429);
    assert_eq!(s.count(ShopifyAnswer::Ok), 41);
    assert_eq!(s.count(ShopifyAnswer::Throttled), 2);
    assert_eq!(s.throttles().len(), 2);
}

#[test]
fn another_method_is_not_found_and_not_recorded() {
    let mut s = ShopifyState::new(ShopifyConfig::STANDARD);
    assert_eq!(request(&mut s, "POST", Instant::now()), Reply::new(404));
    assert!(s.answers.is_empty() && s.arrivals.is_empty());
}
