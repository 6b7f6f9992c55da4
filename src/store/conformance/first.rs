//! The check that a store keeps an origin's first contact and its first
//! wave (`origin/first.rs`) as one shared state: tasks of other handles
//! wait for the first answer, then for the answers of the wave it
//! released, and a pushback among those holds them all.

use std::time::Duration;

use super::{LATEST, OrFail, PACING};
use crate::origin::{Admission, OriginState, Outcome, PacingConfig, Within};
use crate::store::Store;

/// The default policy's first contact.
const FIRST: PacingConfig = PacingConfig {
    first_contact: Duration::from_millis(500),
    ..PACING
};

/// A task of `store` asks to send to `origin`; `waited`: it waited for the
/// first answer.
async fn ask<S: Store>(store: &S, origin: &str, waited: bool) -> Admission {
    store
        .update_origin(origin, move |s: &mut OriginState, now| {
            s.admit_task(
                FIRST,
                now.time(),
                Within::both(LATEST),
                crate::Cost::new(0),
                waited,
            )
        })
        .await
        .or_fail("update")
}

/// One handle's task is an origin's first contact; another handle's two
/// tasks wait for its answer, then leave (the first wave) while a new task
/// waits for their answers; one of them is a pushback, which holds the
/// new task at the gate.
pub async fn a_first_wave_is_shared_across_handles<S: Store + Clone>(store: S) {
    let o = "http://conformance-first-wave.test:80";
    let other = store.clone();
    let first = ask(&store, o, false).await;
    assert_eq!(first, Admission::Now, "the first contact");
    for _ in 0..2 {
        let waits = ask(&other, o, false).await;
        assert!(
            matches!(waits, Admission::FirstAnswer(_)),
            "a task beside the first contact: {waits:?}"
        );
    }
    store
        .record(o, FIRST, Outcome::Admitted)
        .await
        .or_fail("record");
    for _ in 0..2 {
        let goes = ask(&other, o, true).await;
        assert_eq!(goes, Admission::Now, "a task that waited, once answered");
    }
    let waits = ask(&store, o, false).await;
    assert!(
        matches!(waits, Admission::FirstWave(_)),
        "a new task while the wave is out: {waits:?}"
    );
    other
        .record(o, FIRST, Outcome::Admitted)
        .await
        .or_fail("record");
    let back = Outcome::Pushback {
        retry_in: Some(Duration::from_secs(5)),
        hold_at_least: None,
    };
    other.record(o, FIRST, back).await.or_fail("record");
    let held = ask(&store, o, false).await;
    assert!(
        matches!(held, Admission::GateClosed(_)),
        "a new task after a pushback in the wave: {held:?}"
    );
}
