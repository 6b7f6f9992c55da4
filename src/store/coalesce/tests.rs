//! Successes counted in the process are written under the pacing they
//! were counted with.

use std::time::Duration;

use super::Coalesced;
use crate::origin::{Admission, Outcome, PacingConfig};
use crate::store::Store;
use crate::{MemoryStore, Quota};

const O: &str = "http://coalesced.test:80";

/// A bucket of 1 every 500 ms, answered with a success every 2 s: the
/// counted successes, written later, raised the declared bucket's rate
/// (as a learned smooth pace rises), and the queue then measured its
/// intervals at the raised rate (sim seeds 7629 and 9893).
#[tokio::test(start_paused = true)]
async fn counted_successes_do_not_raise_a_declared_bucket() {
    let store = Coalesced::new(MemoryStore::new());
    let quota = Quota::new(1, Duration::from_millis(500)).refilled();
    let cfg = PacingConfig {
        declared: Some(quota),
        ..PacingConfig::DEFAULT
    };
    let admitted = store
        .update_origin(O, move |s, now| {
            s.admit(cfg, now.time(), Duration::from_secs(10))
        })
        .await;
    assert_eq!(admitted, Ok(Admission::Now));
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let recorded = store.record(O, cfg, Outcome::Admitted).await;
        assert_eq!(recorded, Ok(None));
    }
    // Written within `FLUSH_EVERY`.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rate = store.update_origin(O, |s, _| s.rate()).await;
    let rate = rate.expect("memory store");
    assert!(
        rate <= quota.rate() * (1.0 + 1e-9),
        "the declared bucket's rate {} raised to {rate}",
        quota.rate()
    );
}
