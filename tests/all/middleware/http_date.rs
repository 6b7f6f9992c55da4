//! `Retry-After` as an HTTP-date: measured from the server's `Date`, so a
//! skewed server clock does not matter.

use super::support::*;

#[tokio::test]
async fn http_date_is_measured_from_the_date_header() {
    let server = MockServer::start().await;
    let arrivals = mount_fn(&server, 2, |i| {
        if i == 0 {
            let now = SystemTime::now();
            status(429)
                .insert_header("Date", httpdate::fmt_http_date(now).as_str())
                .insert_header(
                    "Retry-After",
                    httpdate::fmt_http_date(now + Duration::from_secs(2)).as_str(),
                )
        } else {
            ok()
        }
    })
    .await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert!(gap >= Duration::from_secs(2), "retried after {gap:?}");
    assert!(
        gap < Duration::from_secs(2) + MARGIN,
        "retried after {gap:?}"
    );
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

#[tokio::test]
async fn http_date_with_skewed_server_clock_waits_the_servers_delta() {
    let server = MockServer::start().await;
    // The server's clock is an hour behind ours: its Retry-After date is
    // an hour in *our* past, but one second after its own Date.
    let arrivals = mount_fn(&server, 2, |i| {
        if i == 0 {
            let server_now = SystemTime::now() - Duration::from_secs(3600);
            status(429)
                .insert_header("Date", httpdate::fmt_http_date(server_now).as_str())
                .insert_header(
                    "Retry-After",
                    httpdate::fmt_http_date(server_now + Duration::from_secs(1)).as_str(),
                )
        } else {
            ok()
        }
    })
    .await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert!(
        gap >= Duration::from_secs(1),
        "retried after {gap:?} (not 0)"
    );
    assert!(
        gap < Duration::from_secs(1) + MARGIN,
        "retried after {gap:?}"
    );
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

#[tokio::test]
async fn http_date_in_the_past_is_retried_at_once() {
    let server = MockServer::start().await;
    let arrivals = mount_fn(&server, 2, |i| {
        if i == 0 {
            let now = SystemTime::now();
            status(429)
                .insert_header("Date", httpdate::fmt_http_date(now).as_str())
                .insert_header(
                    "Retry-After",
                    httpdate::fmt_http_date(now - Duration::from_secs(60)).as_str(),
                )
        } else {
            ok()
        }
    })
    .await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    let gap = arrivals.first_gap();
    assert!(gap < Duration::from_millis(500), "retried after {gap:?}");
    server.verify().await;
}
