//! Stripe (`server/stripe.rs`), as the test `stripe` runs it: 300 keyed
//! updates of 100 customers, 32 in flight, about 7% a second update of
//! the customer the update before touched (meeting its lock), against a
//! token bucket of 25 a second; ours with the default policy and the
//! documented quota declared, `Policy::quota(origin,
//! Quota::per_second(25))`.

use std::time::{Duration, Instant};

use reqwest_backpressure::{IdempotencyKey, Policy, Quota};

use super::{Columns, Figure, VendorRow, all_through, none, within};
use crate::config::ClientKind;
use crate::harness::run_requests;
use crate::server::stripe::{StripeAnswer, StripeConfig, StripeState, customer_path};
use crate::server::vendor_loads::stripe::{
    IN_FLIGHT, LOCK, RATE, UPDATES, body, customers, follow_ups, ideal,
};
use crate::server::wire::JudgedServer;

/// The table's heading and columns.
pub(super) fn columns() -> Columns {
    let follow = follow_ups(&customers());
    Columns {
        heading: format!(
            "Stripe: {UPDATES} keyed updates, {IN_FLIGHT} in flight, {follow} of them a second \
             update of the customer before (a lock of {} ms); a token bucket of {RATE} a second",
            LOCK.as_millis()
        ),
        rejections: &["rate_limit 429s", "lock_timeout 429s"],
        figures: &["last update"],
        extra: &["busiest second"],
        notes: "Ideal: the bucket's burst, then one every 1/25 s, for the updates and the \
                lock timeouts the row met (each a request the bucket admitted). Premature: — \
                (Stripe names no time). Busiest second: the most requests in a whole second of \
                the server's clock (the documented rate is 25).",
    }
}

/// One row: `kind`'s client against a fresh server.
pub(super) async fn row(kind: ClientKind, limit: Duration) -> VendorRow {
    let server = JudgedServer::start(StripeState::new(StripeConfig::test_mode(LOCK))).await;
    let declared = Policy::default().quota(&server.uri, Quota::per_second(RATE));
    let client = kind.with_policy(declared, None);
    let uri = &server.uri;
    let updates = customers().into_iter().enumerate().map(|(i, customer)| {
        client
            .post(format!("{uri}{}", customer_path(&customer)))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body(i))
            .with_extension(IdempotencyKey::new(format!("update-{i}")))
    });
    let started = Instant::now();
    let (side, timed_out) = run_requests(updates, started, limit, Some(IN_FLIGHT)).await;
    let seen = server.finish();
    let complete = side.ok as usize == UPDATES && timed_out.is_none();
    let locks = seen.count(StripeAnswer::LockTimeout);
    let figure = Figure {
        last: seen.last_update(),
        ideal: ideal(UPDATES + locks, RATE),
        complete,
    };
    let busiest = seen.per_second().into_iter().max().unwrap_or(0);
    let limited = seen.count(StripeAnswer::RateLimited);
    let targets = vec![
        all_through(side.ok, UPDATES, complete),
        within("last update", &figure, 1.2, "ideal"),
        none(limited, "rate_limit 429s"),
        (
            busiest <= RATE as usize,
            format!("busiest second {busiest} (target ≤ {RATE})"),
        ),
    ];
    VendorRow {
        client: kind,
        n: UPDATES,
        timed_out,
        requests: seen.answers.len(),
        rejections: vec![limited, locks],
        premature: None,
        figures: vec![figure],
        extra: vec![busiest.to_string()],
        targets,
        side,
    }
}
