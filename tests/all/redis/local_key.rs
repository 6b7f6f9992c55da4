//! A local idempotency key through Redis: leased as any key is (one task
//! at a time across stores), and never sent.

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_keys_lease_refuses_it_in_another_store_and_nothing_is_sent() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let prefix = "rbp-local:";
        let a = client(store(&redis, prefix).await, policy());
        let b = client(store(&redis, prefix).await, policy());
        let (server, arrivals) = scripted(retry_after_1_then_ok).await;
        let url = format!("{}/messages", server.uri());
        let local = || IdempotencyKey::local("message-1");

        let first = tokio::spawn(
            a.post(&url)
                .with_extension(local())
                .with_extension(Deadline::after(Duration::from_secs(10)))
                .send(),
        );
        arrivals.wait_for(1).await;

        let mut conn = redis.conn();
        let leases = keys(&mut conn, &format!("{prefix}lease:*"));
        assert_eq!(leases.len(), 1, "one lease in Redis: {leases:?}");
        assert!(!leases[0].contains("message-1"), "key text in {leases:?}");

        // The same key through the other store, local or sent: refused.
        for key in [local(), IdempotencyKey::new("message-1")] {
            let second = b.post(&url).with_extension(key).send().await;
            assert_eq!(code(&second), "already_active");
        }
        assert_eq!(arrivals.len(), 1, "B sent nothing");

        let first = first.await.expect("task").expect("A's task succeeds");
        assert_eq!(first.status(), 200);
        assert_eq!(report(&first).attempts(), 2);
        assert_eq!(arrivals.idempotency_keys(), vec![None, None]);
    })
    .await;
}
