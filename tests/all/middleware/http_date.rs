//! `Retry-After` as an HTTP-date: measured from the server's `Date`, so a
//! skewed server clock does not matter.

use super::support::*;

#[tokio::test]
async fn http_date_is_measured_from_the_date_header() {
    let (server, arrivals) = serve_fn(2, |i| {
        if i == 0 {
            let now = SystemTime::now();
            dated_429(now, now + Duration::from_secs(2))
        } else {
            ok()
        }
    })
    .await;

    let resp = get_once(&server, exact()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert_retried_within(gap, Duration::from_secs(2), Duration::from_secs(2) + MARGIN);
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

#[tokio::test]
async fn http_date_with_skewed_server_clock_waits_the_servers_delta() {
    // The server's clock is an hour behind ours: its Retry-After date is
    // an hour in *our* past, but one second after its own Date.
    let (server, arrivals) = serve_fn(2, |i| {
        if i == 0 {
            let server_now = SystemTime::now() - Duration::from_secs(3600);
            dated_429(server_now, server_now + Duration::from_secs(1))
        } else {
            ok()
        }
    })
    .await;

    let resp = get_once(&server, exact()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert_retried_within(gap, Duration::from_secs(1), Duration::from_secs(1) + MARGIN);
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

#[tokio::test]
async fn http_date_in_the_past_is_retried_at_once() {
    let (server, arrivals) = serve_fn(2, |i| {
        if i == 0 {
            let now = SystemTime::now();
            dated_429(now, now - Duration::from_secs(60))
        } else {
            ok()
        }
    })
    .await;

    let resp = get_once(&server, exact()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    let gap = arrivals.first_gap();
    assert!(gap < Duration::from_millis(500), "retried after {gap:?}");
    server.verify().await;
}
