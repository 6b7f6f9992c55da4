//! Non-idempotent methods and idempotency keys: which requests may be
//! retried, the `Idempotency-Key` header on every attempt (in either
//! form), one active task per key, a key freed when its task ends or is
//! dropped, and a key never shown.

use reqwest_backpressure::IdempotencyKeyForm;

use super::support::*;

#[tokio::test]
async fn post_without_key_is_not_retried() {
    let (server, _) = serve_seq(1, vec![too_many("0"), ok()]).await;

    let resp = client(exact()).post(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("retry_not_authorized_by_contract"));
    assert_eq!(
        idempotency_headers(&server).await,
        vec![Vec::<String>::new()]
    );
    server.verify().await;
}

#[tokio::test]
async fn post_with_key_is_retried_and_every_attempt_carries_the_header() {
    let (server, _) = serve_seq(3, vec![too_many("0"), too_many("0"), ok()]).await;

    let resp = client(exact())
        .post(server.uri())
        .body("order")
        .with_extension(IdempotencyKey::new("order-42"))
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 3);
    assert_eq!(
        idempotency_headers(&server).await,
        vec![vec!["\"order-42\"".to_owned()]; 3]
    );
    server.verify().await;
}

#[tokio::test]
async fn post_with_caller_set_header_is_retried_with_the_header_unchanged() {
    let (server, _) = serve_seq(2, vec![too_many("0"), ok()]).await;

    let resp = client(exact())
        .post(server.uri())
        .header("Idempotency-Key", "caller-7")
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(
        idempotency_headers(&server).await,
        vec![vec!["caller-7".to_owned()]; 2]
    );
    server.verify().await;
}

#[tokio::test]
async fn extension_does_not_overwrite_a_caller_set_header() {
    let (server, _) = serve_seq(2, vec![too_many("0"), ok()]).await;

    let resp = client(exact())
        .post(server.uri())
        .header("Idempotency-Key", "from-header")
        .with_extension(IdempotencyKey::new("from-extension"))
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(
        idempotency_headers(&server).await,
        vec![vec!["from-header".to_owned()]; 2]
    );
    server.verify().await;
}

/// The header each form sends for a key: `(form, key, header)`.
const FORMS: [(IdempotencyKeyForm, &str, &str); 4] = [
    (IdempotencyKeyForm::SfString, "order-42", r#""order-42""#),
    (IdempotencyKeyForm::Raw, "order-42", "order-42"),
    (IdempotencyKeyForm::SfString, r#"a"b\c"#, r#""a\"b\\c""#),
    (IdempotencyKeyForm::Raw, r#"a"b\c"#, r#"a"b\c"#),
];

#[tokio::test]
async fn each_form_is_sent_on_the_first_send_and_on_the_retry_after_a_429() {
    for (form, key, header) in FORMS {
        let (server, _) = serve_seq(2, vec![too_many("0"), ok()]).await;

        let resp = client(exact().idempotency_key_form(form))
            .post(server.uri())
            .body("order")
            .with_extension(IdempotencyKey::new(key))
            .send()
            .await
            .unwrap();

        assert_eq!(resp.status(), StatusCode::OK, "{form:?} {key}");
        assert_eq!(report(&resp).attempts(), 2, "{form:?} {key}");
        assert_eq!(
            idempotency_headers(&server).await,
            vec![vec![header.to_owned()]; 2],
            "{form:?} {key}"
        );
        server.verify().await;
    }
}

#[tokio::test]
async fn a_caller_set_header_is_sent_as_written_in_either_form() {
    for form in [IdempotencyKeyForm::SfString, IdempotencyKeyForm::Raw] {
        for written in ["caller-7", r#""caller-7""#] {
            let (server, _) = serve_seq(2, vec![too_many("0"), ok()]).await;

            let resp = client(exact().idempotency_key_form(form))
                .post(server.uri())
                .header("Idempotency-Key", written)
                .with_extension(IdempotencyKey::new("from-extension"))
                .send()
                .await
                .unwrap();

            assert_eq!(resp.status(), StatusCode::OK, "{form:?} {written}");
            assert_eq!(report(&resp).attempts(), 2, "{form:?} {written}");
            assert_eq!(
                idempotency_headers(&server).await,
                vec![vec![written.to_owned()]; 2],
                "{form:?} {written}"
            );
            server.verify().await;
        }
    }
}

#[tokio::test]
async fn an_invalid_key_is_refused_in_either_form_without_sending() {
    let (server, _) = serve_seq(0, vec![ok()]).await;
    for form in [IdempotencyKeyForm::SfString, IdempotencyKeyForm::Raw] {
        let client = client(exact().idempotency_key_form(form));
        for key in ["", "line\nbreak", "tab\tkey", "del\u{7f}", "ключ"] {
            let err = client
                .post(server.uri())
                .with_extension(IdempotencyKey::new(key))
                .send()
                .await
                .unwrap_err();
            assert_eq!(
                our_code(&err),
                Some("invalid_idempotency_key"),
                "{form:?} {key:?}: {err:?}"
            );
        }
    }
    // A server trims the spaces around a raw value, so it would read
    // another key: refused too. Quoted, the spaces are part of the key.
    let raw = client(exact().idempotency_key_form(IdempotencyKeyForm::Raw));
    for key in [" lead", "trail "] {
        let err = raw
            .post(server.uri())
            .with_extension(IdempotencyKey::new(key))
            .send()
            .await
            .unwrap_err();
        assert_eq!(our_code(&err), Some("invalid_idempotency_key"), "{key:?}");
        assert!(IdempotencyKey::new(key).header_value().is_some());
    }
    server.verify().await;
}

#[tokio::test(start_paused = true)]
async fn one_key_is_one_lease_whichever_form_or_header_names_it() {
    let store = MemoryStore::new();
    let raw = RetryAfterMiddleware::with_store(
        exact().idempotency_key_form(IdempotencyKeyForm::Raw),
        store.clone(),
    );
    let script = || seq(vec![push_back(429, "1"), answer(200)]);
    let (raw, raw_arrivals) = offline_with(raw, script());
    let (quoted, quoted_arrivals) = offline_on(&store, script());

    let first = spawn_post_keyed(&raw, URL, "order-42");
    raw_arrivals.wait_for(1).await;

    // The extension in the other form, and a caller's header bare or
    // quoted, in either client: all name the running task's key.
    for client in [&raw, &quoted] {
        let by_extension = client
            .post(URL)
            .with_extension(IdempotencyKey::new("order-42"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(our_code(&by_extension), Some("already_active"));
        for written in ["order-42", r#""order-42""#] {
            let by_header = client
                .post(URL)
                .header("Idempotency-Key", written)
                .send()
                .await
                .unwrap_err();
            assert_eq!(our_code(&by_header), Some("already_active"), "{written}");
        }
    }
    assert!(
        !first.is_finished(),
        "the first task should still be waiting"
    );

    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(
        raw_arrivals.idempotency_keys(),
        vec![Some("order-42".to_owned()); 2]
    );
    assert_eq!(quoted_arrivals.len(), 0);
    assert_eq!(store.active_keys(), 0);
}

#[tokio::test(start_paused = true)]
async fn second_send_with_an_active_key_fails_without_sending() {
    let (client, arrivals) = offline(exact(), seq(vec![push_back(429, "1"), answer(200)]));

    let first = spawn_post_keyed(&client, URL, "order-42");
    arrivals.wait_for(1).await;

    let start = tokio::time::Instant::now();
    let err = client
        .post(URL)
        .with_extension(IdempotencyKey::new("order-42"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(our_code(&err), Some("already_active"), "{err:?}");
    assert!(start.elapsed() < Duration::from_millis(500));
    assert!(
        !first.is_finished(),
        "the first task should still be waiting"
    );

    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    // Only the first task's two attempts were sent.
    assert_eq!(
        arrivals.idempotency_keys(),
        vec![Some("\"order-42\"".to_owned()); 2]
    );
}

#[tokio::test(start_paused = true)]
async fn a_different_key_is_not_refused_and_waits_for_the_origin_gate() {
    let (client, arrivals) = offline(exact(), |path: &str, i| match (path, i) {
        ("/a", 0) => push_back(429, "1"),
        _ => answer(200),
    });

    let first = spawn_post_keyed(&client, format!("{URL}a"), "order-42");
    arrivals.wait_for(1).await;

    let resp = client
        .post(format!("{URL}b"))
        .with_extension(IdempotencyKey::new("order-43"))
        .send()
        .await
        .expect("a different key is not already_active");
    assert_eq!(resp.status(), StatusCode::OK);
    // Waiting at the gate spends no attempt.
    assert_eq!(report(&resp).attempts(), 1);
    // Same origin: held until the server's time, never earlier.
    let gap = arrivals.at("/b")[0] - arrivals.at("/a")[0];
    assert_retried_within(gap, Duration::from_secs(1), Duration::from_secs(2) + MARGIN);

    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(arrivals.at("/a").len(), 2);
    assert_eq!(arrivals.at("/b").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn another_origin_is_not_blocked_even_with_the_same_key() {
    let (client, arrivals) = offline(exact(), |path: &str, i| match (path, i) {
        ("/busy", 0) => push_back(429, "1"),
        _ => answer(200),
    });

    let first = spawn_post_keyed(&client, "http://busy.test/busy", "order-42");
    arrivals.wait_for(1).await;

    let start = tokio::time::Instant::now();
    let resp = client
        .post("http://free.test/free")
        .with_extension(IdempotencyKey::new("order-42"))
        .send()
        .await
        .expect("keys are per origin");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 1);
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    assert!(
        !first.is_finished(),
        "the first task should still be waiting"
    );

    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(arrivals.at("/busy").len(), 2);
    assert_eq!(arrivals.at("/free").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn store_holds_the_key_only_while_the_task_runs() {
    let store = MemoryStore::new();
    let (client, arrivals) = offline_on(&store, seq(vec![push_back(429, "1"), answer(200)]));
    assert_eq!(store.active_keys(), 0);

    let first = spawn_post_keyed(&client, URL, "order-42");
    arrivals.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        store.active_keys(),
        1,
        "one entry while waiting on Retry-After"
    );

    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(store.active_keys(), 0, "no entry after the task ended");
    assert_eq!(arrivals.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_mid_wait_frees_the_key() {
    let store = MemoryStore::new();
    let (client, arrivals) = offline_on(&store, seq(vec![push_back(429, "1"), answer(200)]));

    let send = client
        .post(URL)
        .with_extension(IdempotencyKey::new("order-42"))
        .send();
    let outcome = tokio::time::timeout(Duration::from_millis(400), send).await;
    assert!(outcome.is_err(), "the task should have been waiting");
    assert_eq!(arrivals.len(), 1, "cancelled mid-wait, after one attempt");
    assert_eq!(store.active_keys(), 0, "the lease is freed on drop");

    let resp = client
        .post(URL)
        .with_extension(IdempotencyKey::new("order-42"))
        .send()
        .await
        .expect("not already_active");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 1);
    // The cancelled task's Retry-After still holds its origin.
    let gap = arrivals.first_gap();
    assert_retried_within(gap, Duration::from_secs(1), Duration::from_secs(1) + MARGIN);
    assert_eq!(store.active_keys(), 0);
    assert_eq!(arrivals.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn debug_output_never_shows_an_idempotency_key() {
    let store = MemoryStore::new();
    let (client, arrivals) = offline_on(&store, seq(vec![push_back(429, "1"), answer(200)]));
    let waiting = spawn_post_keyed(&client, URL, "sk_live_SECRET_42");
    // Waiting on its Retry-After: the key is in the store.
    arrivals.wait_for(1).await;
    assert_eq!(store.active_keys(), 1);
    let shown = format!(
        "{store:?} {:?}",
        RetryAfterMiddleware::with_store(exact(), store.clone())
    );
    assert!(!shown.contains("SECRET"), "{shown}");
    assert!(!format!("{:?}", IdempotencyKey::new("sk_live_SECRET_42")).contains("SECRET"));
    assert_eq!(waiting.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(arrivals.len(), 2);
}
