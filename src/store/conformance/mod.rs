//! The checks a [`Store`] must pass, to run in your own tests (feature
//! `conformance`).
//!
//! Why? A store only stores: leases, and atomic updates of values it does
//! not interpret. What breaks a store is rarely its happy path; it is two
//! updates interleaving, a lease that outlives its TTL, a release with a
//! stale token, a handle that does not see what another wrote. These checks
//! drive a store the way the middleware's tasks do, many at once, and
//! panic with what went wrong, as tower-test's mocks and redis-test's
//! helpers do for their traits.
//!
//! ```no_run
//! # use reqwest_backpressure::MemoryStore as MyStore;
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn my_store_conforms() {
//!     reqwest_backpressure::conformance::run_all(|| async { MyStore::new() }).await;
//! }
//! ```
//!
//! Each check takes a fresh store (clones share its state, as every
//! store's handles do), runs on the real clock (a few hundred milliseconds
//! each) on a tokio runtime, and uses keys and origins of its own under
//! `conformance`. Some keys name a scope of an origin
//! (`scheme://host:port#scope`, the scope's name cleaned and bounded as the
//! middleware does): each is a limit of its own, kept apart from its
//! origin's and from the other scopes'. One check,
//! [`idle_scopes_are_forgotten_as_origins_are`], runs on tokio's paused
//! clock and is not in [`run_all`].

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinSet;

use super::{LeaseToken, Store, StoreError};
use crate::budget::RetryBudget;
use crate::origin::{Admission, OriginState, Outcome, PacingConfig, Reservation};

mod first;
mod scopes;
pub use first::a_first_wave_is_shared_across_handles;
pub use scopes::{
    hostile_scope_names_make_keys_of_their_own, idle_scopes_are_forgotten_as_origins_are,
    scope_gates_hold_apart, scope_paces_are_learned_apart, scope_quotas_are_spent_apart,
};

/// The gate and the pace on, as the default policy has them.
const PACING: PacingConfig = PacingConfig::DEFAULT;
/// How long a task accepts to wait, in the checks.
const LATEST: Duration = Duration::from_secs(10);

/// Runs every check, each on a store from `new_store`.
pub async fn run_all<S, F, Fut>(mut new_store: F)
where
    S: Store + Clone,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    leases_exclude(new_store().await).await;
    leases_expire(new_store().await).await;
    stale_release_changes_nothing(new_store().await).await;
    one_lease_among_concurrent_acquires(new_store().await).await;
    origin_state_starts_new_and_stays(new_store().await).await;
    concurrent_admits_spend_a_stated_quota_once(new_store().await).await;
    concurrent_admits_never_exceed_a_learned_batch(new_store().await).await;
    another_handle_sees_a_pushback(new_store().await).await;
    budget_accounting_holds_under_concurrency(new_store().await).await;
    scope_gates_hold_apart(new_store().await).await;
    scope_quotas_are_spent_apart(new_store().await).await;
    scope_paces_are_learned_apart(new_store().await).await;
    hostile_scope_names_make_keys_of_their_own(new_store().await).await;
    a_first_wave_is_shared_across_handles(new_store().await).await;
}

/// A held lease refuses its key, not another; a release frees it.
pub async fn leases_exclude<S: Store>(store: S) {
    let key = "conformance:exclude";
    let token = held(lease(&store, key, LATEST).await, "a free key");
    assert_eq!(
        lease(&store, key, LATEST).await,
        None,
        "a held key leased again"
    );
    let other = lease(&store, "conformance:exclude-other", LATEST).await;
    assert!(other.is_some(), "another key refused");
    release(&store, key, token).await;
    assert!(
        lease(&store, key, LATEST).await.is_some(),
        "a released key still refused"
    );
}

/// A lease frees itself after its TTL.
pub async fn leases_expire<S: Store>(store: S) {
    let key = "conformance:expire";
    let _gone = lease(&store, key, Duration::from_millis(100)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        lease(&store, key, LATEST).await.is_some(),
        "a lease 200 ms past its TTL still held"
    );
}

/// A release with a token that no longer holds the lease (it expired and
/// another task took the key), or never did, leaves the holder's lease.
pub async fn stale_release_changes_nothing<S: Store>(store: S) {
    let key = "conformance:stale";
    let stale = lease(&store, key, Duration::from_millis(100)).await;
    let stale = held(stale, "a free key");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let holder = held(
        lease(&store, key, LATEST).await,
        "a key whose lease expired",
    );
    release(&store, key, stale).await;
    assert_eq!(
        lease(&store, key, LATEST).await,
        None,
        "a stale token freed it"
    );
    release(&store, key, LeaseToken::random()).await;
    assert_eq!(
        lease(&store, key, LATEST).await,
        None,
        "a foreign token freed it"
    );
    release(&store, key, holder).await;
    assert!(lease(&store, key, LATEST).await.is_some(), "never freed");
}

/// Of many tasks asking for one key at once, one gets it.
pub async fn one_lease_among_concurrent_acquires<S: Store + Clone>(store: S) {
    let granted = concurrently(&store, 32, |s| async move {
        lease(&s, "conformance:race", LATEST).await.is_some()
    })
    .await;
    let held = granted.iter().filter(|g| **g).count();
    assert_eq!(held, 1, "{held} of 32 concurrent acquires got the lease");
}

/// An unknown origin has no state and no gate; an update creates its state
/// (open, not paced) and is kept; the store's time never goes back.
pub async fn origin_state_starts_new_and_stays<S: Store>(store: S) {
    let o = "http://conformance-new.test:80";
    let (state, _) = store.read_origin(o).await.or_fail("read");
    assert_eq!(state, None, "an unknown origin has a state");
    assert_eq!(store.gate(o).await.or_fail("gate"), None);
    let mut last = Duration::ZERO;
    for _ in 0..3 {
        let (fresh, now) = store
            .update_origin(o, |s, now| {
                (s.gate_in(now.time()).is_none() && s.rate() == 0.0, now)
            })
            .await
            .or_fail("update");
        assert!(fresh, "a new origin's state is not open and unpaced");
        assert!(now.time() >= last, "the store's time went back");
        last = now.time();
    }
    let back = Outcome::Pushback {
        retry_in: Some(Duration::from_secs(5)),
        hold_at_least: None,
    };
    store
        .update_origin(o, move |s, now| s.observe(PACING, now.time(), back))
        .await
        .or_fail("update");
    let (state, now) = store.read_origin(o).await.or_fail("read");
    let gate = state.and_then(|s| s.gate_in(now));
    assert!(gate.is_some(), "an update was not kept: {state:?}");
}

/// Many admissions at once against an origin whose server stated a quota
/// of 5: exactly 5 are let through, the next one is told the quota is
/// spent, the rest wait at the gate.
pub async fn concurrent_admits_spend_a_stated_quota_once<S: Store + Clone>(store: S) {
    let o = "http://conformance-quota.test:80";
    let quota = Outcome::Quota {
        remaining: 5,
        reset_in: Duration::from_secs(5),
        limit: None,
        window: None,
        sent_ago: Duration::ZERO,
        tokens: None,
    };
    store
        .update_origin(o, move |s, now| s.observe(PACING, now.time(), quota))
        .await
        .or_fail("update");
    let admissions = concurrently(&store, 24, |s| async move { admit(&s, o).await }).await;
    let through = admissions.iter().filter(|a| sends(a)).count();
    let held = admissions
        .iter()
        .filter(|a| matches!(a, Admission::QuotaHeld(_)))
        .count();
    assert_eq!(
        through, 5,
        "a quota of 5 let {through} through: {admissions:?}"
    );
    assert_eq!(
        held, 1,
        "{held} tasks told the quota is spent: {admissions:?}"
    );
}

/// An origin learned to admit 10 per 300 ms (10 successes, then "come back
/// in 300 ms"): once its gate reopens, 30 admissions at once leave 10 in
/// the first period (the probe and its batch), each slot reserved once,
/// and nobody refused.
pub async fn concurrent_admits_never_exceed_a_learned_batch<S: Store + Clone>(store: S) {
    let o = "http://conformance-batch.test:80";
    let batch = 10;
    let period = Duration::from_millis(300);
    for _ in 0..batch {
        store
            .record(o, PACING, Outcome::Admitted)
            .await
            .or_fail("record");
    }
    let back = Outcome::Pushback {
        retry_in: Some(period),
        hold_at_least: None,
    };
    let closed = store.record(o, PACING, back).await.or_fail("record");
    assert!(closed.is_some(), "a pushback closed no gate");
    let give_up = tokio::time::Instant::now() + Duration::from_secs(5);
    while store.gate(o).await.or_fail("gate").is_some() {
        assert!(
            tokio::time::Instant::now() < give_up,
            "the gate never reopened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let admissions = concurrently(&store, 3 * batch, |s| async move { admit(&s, o).await }).await;
    assert_first_batch(&admissions, period, batch, "the origin");
}

/// The admissions of one limit behind its reopened gate: every task
/// admitted, `batch` of them in the first `period` (at once, or to a slot
/// within half of it), and no slot reserved twice.
fn assert_first_batch(admissions: &[Admission], period: Duration, batch: usize, what: &str) {
    let refused: Vec<_> = admissions.iter().filter(|a| !sends(a)).collect();
    assert!(
        refused.is_empty(),
        "tasks in {what} not admitted: {refused:?}"
    );
    let first = admissions
        .iter()
        .filter(|a| match a {
            Admission::SlotReserved(wait, _) => *wait < period / 2,
            _ => true,
        })
        .count();
    assert_eq!(
        first, batch,
        "{first} admitted in {what}'s first period of a batch of {batch}: {admissions:?}"
    );
    let reserved: Vec<Reservation> = admissions
        .iter()
        .filter_map(|a| match a {
            Admission::SlotReserved(_, r) => Some(*r),
            _ => None,
        })
        .collect();
    for (i, r) in reserved.iter().enumerate() {
        assert!(
            !reserved[i + 1..].contains(r),
            "a slot reserved twice in {what}: {r:?}"
        );
    }
}

/// A pushback recorded through one handle closes the gate another handle
/// reads, and holds its admissions.
pub async fn another_handle_sees_a_pushback<S: Store + Clone>(store: S) {
    let o = "http://conformance-shared.test:80";
    let other = store.clone();
    let back = Outcome::Pushback {
        retry_in: Some(Duration::from_secs(5)),
        hold_at_least: None,
    };
    let closed = store.record(o, PACING, back).await.or_fail("record");
    assert!(
        closed.is_some_and(|d| d <= Duration::from_secs(5)),
        "{closed:?}"
    );
    let gate = other.gate(o).await.or_fail("gate");
    assert!(
        gate.is_some_and(|g| g > Duration::from_secs(4) && g <= Duration::from_secs(5)),
        "the other handle reads the gate as {gate:?}"
    );
    let admission = admit(&other, o).await;
    assert!(
        matches!(admission, Admission::GateClosed(_)),
        "the other handle admitted {admission:?}"
    );
}

/// The budget's balance under concurrent withdrawals, deposits and refunds:
/// a budget of 100 grants exactly 100 of 120 withdrawals, then one more per
/// deposit or refund.
pub async fn budget_accounting_holds_under_concurrency<S: Store + Clone>(store: S) {
    // One retry per first send, none refilled with time: 100 at most.
    let budget = RetryBudget::new(1.0, 0.0);
    let granted = concurrently(
        &store,
        120,
        move |s| async move { withdraw(&s, budget).await },
    )
    .await;
    let n = granted.iter().filter(|g| **g).count();
    assert_eq!(
        n, 100,
        "{n} of 120 withdrawals from a budget of 100 granted"
    );
    let deposits = concurrently(&store, 3, move |s| async move {
        s.deposit(&budget).await.or_fail("deposit");
    })
    .await;
    assert_eq!(deposits.len(), 3);
    for i in 0..3 {
        assert!(withdraw(&store, budget).await, "deposit {i} not withdrawn");
    }
    assert!(!withdraw(&store, budget).await, "more than was deposited");
    store
        .update_budget(move |b, now| b.refund(&budget, now.time()))
        .await
        .or_fail("refund");
    assert!(withdraw(&store, budget).await, "a refund not withdrawn");
    assert!(!withdraw(&store, budget).await, "more than was refunded");
}

/// Runs `n` copies of `f` at once, each on a handle of `store`; their
/// answers.
async fn concurrently<S, T, Fut>(store: &S, n: usize, f: impl Fn(S) -> Fut) -> Vec<T>
where
    S: Store + Clone,
    T: Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    let mut tasks = JoinSet::new();
    for _ in 0..n {
        tasks.spawn(f(store.clone()));
    }
    let mut out = Vec::with_capacity(n);
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(t) => out.push(t),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    out
}

async fn lease<S: Store>(store: &S, key: &str, ttl: Duration) -> Option<LeaseToken> {
    store.acquire(key, ttl).await.or_fail("acquire")
}

async fn release<S: Store>(store: &S, key: &str, token: LeaseToken) {
    store.release(key, token).await.or_fail("release");
}

async fn admit<S: Store>(store: &S, origin: &str) -> Admission {
    store
        .update_origin(origin, |s: &mut OriginState, now| {
            s.admit(PACING, now.time(), LATEST)
        })
        .await
        .or_fail("update")
}

async fn withdraw<S: Store>(store: &S, budget: RetryBudget) -> bool {
    store
        .update_budget(move |b, now| b.withdraw(&budget, now.time()))
        .await
        .or_fail("update")
}

/// A store's answer, or a failed check.
trait OrFail<T> {
    fn or_fail(self, what: &str) -> T;
}

impl<T> OrFail<T> for Result<T, StoreError> {
    fn or_fail(self, what: &str) -> T {
        match self {
            Ok(t) => t,
            Err(e) => panic!("{what} failed: {e}"),
        }
    }
}

/// The lease a check needs, or a failed check.
fn held(token: Option<LeaseToken>, what: &str) -> LeaseToken {
    match token {
        Some(token) => token,
        None => panic!("{what} was not leased"),
    }
}

/// Whether a task admitted so leaves (now, or at its slot).
fn sends(admission: &Admission) -> bool {
    matches!(
        admission,
        Admission::Now | Admission::Reopened | Admission::SlotReserved(..)
    )
}
