//! A local idempotency key ([`IdempotencyKey::local`]): the caller's word
//! that a non-idempotent request may be retried, for APIs that define no
//! `Idempotency-Key`. It is never sent, and it keys the task as any key
//! does: one attempt at a time.

use super::support::*;

#[tokio::test(start_paused = true)]
async fn a_local_keys_post_is_retried_and_no_idempotency_key_reaches_the_server() {
    let (client, arrivals) = offline(exact(), seq(vec![push_back(429, "1"), answer(200)]));

    let resp = client
        .post(URL)
        .body("message")
        .with_extension(IdempotencyKey::local("message-42"))
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(arrivals.idempotency_keys(), vec![None, None]);
}

#[tokio::test(start_paused = true)]
async fn without_a_key_the_post_is_still_not_retried() {
    let (client, arrivals) = offline(exact(), seq(vec![push_back(429, "1"), answer(200)]));

    let resp = client.post(URL).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("retry_not_authorized_by_contract"));
    assert_eq!(arrivals.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn two_tasks_with_one_local_key_run_one_attempt_at_a_time() {
    let (client, arrivals) = offline(exact(), seq(vec![push_back(429, "1"), answer(200)]));

    let first = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .post(URL)
                .with_extension(IdempotencyKey::local("message-42"))
                .send()
                .await
        })
    };
    arrivals.wait_for(1).await;

    // The same key, local or sent: the running task's, refused unsent.
    for key in [
        IdempotencyKey::local("message-42"),
        IdempotencyKey::new("message-42"),
    ] {
        let err = client
            .post(URL)
            .with_extension(key)
            .send()
            .await
            .unwrap_err();
        assert_eq!(our_code(&err), Some("already_active"), "{err:?}");
    }
    assert!(!first.is_finished(), "the first task should be waiting");

    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    // Only the first task's two attempts, one after the other.
    assert_eq!(arrivals.len(), 2);
    assert!(arrivals.first_gap() >= Duration::from_secs(1));

    // Its key is free again once it ended.
    let again = client
        .post(URL)
        .with_extension(IdempotencyKey::local("message-42"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn an_invalid_local_key_sends_nothing() {
    let (client, arrivals) = offline(exact(), seq(vec![answer(200)]));
    for bad in ["", "line\nbreak", "ключ"] {
        let err = client
            .post(URL)
            .with_extension(IdempotencyKey::local(bad))
            .send()
            .await
            .unwrap_err();
        assert_eq!(our_code(&err), Some("invalid_idempotency_key"), "{bad:?}");
    }
    assert_eq!(arrivals.len(), 0);
}

#[test]
fn a_local_key_never_shows_its_value() {
    let shown = format!("{:?}", IdempotencyKey::local("secret-order"));
    assert!(!shown.contains("secret-order"), "{shown}");
    assert!(shown.contains("local"), "{shown}");
}
