//! What the store writes: every key has a TTL and a safe name.

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_key_has_a_ttl_and_a_safe_name() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let prefix = "rbp-ttl:";
        let c = client(
            store(&redis, prefix).await,
            policy().missing_retry_after(Fallback::Delay(Duration::from_millis(200))),
        );
        let (server, arrivals) = scripted(retry_after_1_then_ok).await;
        let (bare, bare_arrivals) = scripted(|_, i| match i {
            // No Retry-After: the retry spends the shared budget.
            0 => ResponseTemplate::new(429),
            _ => ResponseTemplate::new(200),
        })
        .await;

        let keyed = tokio::spawn(
            post_keyed(
                &c,
                format!("{}/search?token=secret-token&q=x", server.uri()),
                "user-key-1234",
            )
            .send(),
        );
        let budgeted = tokio::spawn(
            c.get(format!("{}/list?token=secret-token", bare.uri()))
                .send(),
        );
        arrivals.wait_for(1).await;
        bare_arrivals.wait_for(1).await;

        let mut conn = redis.conn();
        let check = |conn: &mut redis::Connection, when: &str| -> Vec<String> {
            let all = keys(conn, "*");
            for k in &all {
                assert!(k.starts_with(prefix), "{when}: unprefixed key {k:?}");
                for bad in [
                    "?",
                    "token",
                    "secret",
                    "search",
                    "list",
                    "127.0.0.1",
                    "http",
                    "user-key",
                ] {
                    assert!(!k.contains(bad), "{when}: key {k:?} contains {bad:?}");
                }
                let ttl = pttl(conn, k);
                assert!(ttl > 0, "{when}: key {k:?} has no TTL ({ttl})");
            }
            all
        };
        // While the keyed task waits: its lease is there, with a TTL.
        let during = check(&mut conn, "during");
        assert!(
            during
                .iter()
                .any(|k| k.starts_with(&format!("{prefix}lease:"))),
            "no lease while waiting: {during:?}"
        );

        let keyed = keyed.await.expect("task").expect("keyed request");
        let budgeted = budgeted.await.expect("task").expect("budgeted request");
        assert_eq!(keyed.status(), 200);
        assert_eq!(budgeted.status(), 200);
        assert_eq!(report(&keyed).attempts(), 2);
        assert_eq!(report(&budgeted).attempts(), 2);
        tokio::time::sleep(Duration::from_millis(200)).await;

        let after = check(&mut conn, "after");
        let origins = after
            .iter()
            .filter(|k| k.starts_with(&format!("{prefix}origin:")))
            .count();
        assert_eq!(origins, 2, "one entry per origin: {after:?}");
        assert!(after.contains(&format!("{prefix}budget")), "{after:?}");
        assert!(
            !after.iter().any(|k| k.contains("lease")),
            "lease left behind: {after:?}"
        );
    })
    .await;
}
