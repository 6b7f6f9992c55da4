//! The fold and the hint, with fixed values.

use super::*;

fn fold(limits: &[(Option<u64>, Option<u64>)]) -> RateLimitHint {
    let mut f = Fold::default();
    for &(remaining, reset) in limits {
        f.push(Limit::new(remaining, reset.map(Duration::from_secs)));
    }
    f.finish()
}

/// A limit with a count, a reset, a quota, a window (seconds) and a
/// unit.
fn quota(remaining: u64, reset: u64, quota: Option<u64>, window: Option<u64>, unit: Unit) -> Limit {
    Limit {
        remaining: Some(remaining),
        reset: Some(Duration::from_secs(reset)),
        quota,
        window: window.map(Duration::from_secs),
        unit,
        ..Limit::default()
    }
}

fn fold_all(limits: &[Limit]) -> RateLimitHint {
    let mut f = Fold::default();
    limits.iter().for_each(|&l| f.push(l));
    let forward = f.finish();
    // The fold does not depend on the order.
    let mut f = Fold::default();
    limits.iter().rev().for_each(|&l| f.push(l));
    assert_eq!(f.finish(), forward);
    forward
}

#[test]
fn tightest_count_binds() {
    let h = fold(&[(Some(50), Some(30)), (Some(10), Some(80000))]);
    assert_eq!(h.remaining(), Some(10));
    assert_eq!(h.reset(), Some(Duration::from_secs(80000)));
    assert!(!h.exhausted());
    assert_eq!(h.retry_in(), None);
}

#[test]
fn latest_exhausted_reset_binds() {
    let h = fold(&[
        (Some(0), Some(30)),
        (Some(0), Some(60)),
        (Some(5), Some(900)),
    ]);
    assert!(h.exhausted());
    assert_eq!(h.reset(), Some(Duration::from_secs(60)));
    assert_eq!(h.retry_in(), Some(Duration::from_secs(60)));
}

#[test]
fn bare_reset_is_a_retry_in() {
    let h = fold(&[(None, Some(2)), (Some(7), Some(60))]);
    assert_eq!(h.retry_in(), Some(Duration::from_secs(2)));
    assert_eq!(h.reset(), Some(Duration::from_secs(60)));
    assert!(!h.exhausted());
    let h = fold(&[(None, Some(2))]);
    assert_eq!(h.reset(), Some(Duration::from_secs(2)));
    assert_eq!(h.remaining(), None);
}

#[test]
fn zero_without_reset_is_not_exhausted() {
    let h = fold(&[(Some(0), None)]);
    assert!(!h.exhausted());
    assert_eq!(h.remaining(), Some(0));
    assert_eq!(h.retry_in(), None);
    assert!(!h.is_empty());
    assert!(fold(&[]).is_empty());
}

#[test]
fn the_binding_limit_gives_its_quota() {
    use Unit::{Requests, Tokens};
    let burst = quota(5, 30, Some(100), Some(60), Requests);
    let daily = quota(900, 80_000, Some(1000), Some(86_400), Requests);
    let h = fold_all(&[burst, daily]);
    assert_eq!(h.limit(), Some(100));
    assert_eq!(h.window(), Some(Duration::from_secs(60)));
    // A token limit binding: no request quota.
    let tokens = quota(2, 60, Some(150_000), None, Tokens);
    let h = fold_all(&[burst, tokens]);
    assert_eq!(h.remaining(), Some(2));
    assert_eq!((h.limit(), h.window()), (None, None));
    // No quota stated: none.
    let h = fold_all(&[quota(5, 30, None, Some(60), Requests)]);
    assert_eq!((h.limit(), h.window()), (None, None));
    // A quota without a window.
    let h = fold_all(&[quota(5, 30, Some(60), None, Requests)]);
    assert_eq!((h.limit(), h.window()), (Some(60), None));
}

#[test]
fn ties_go_to_the_limit_that_says_least() {
    use Unit::{Requests, Tokens};
    let small = quota(0, 30, Some(10), Some(1), Requests);
    let big = quota(0, 80_000, Some(1000), Some(86_400), Requests);
    let h = fold_all(&[small, big]);
    assert_eq!(h.limit(), Some(10));
    assert_eq!(h.window(), Some(Duration::from_secs(1)));
    // The reset stays the latest exhausted one.
    assert_eq!(h.reset(), Some(Duration::from_secs(80_000)));
    // An unstated quota could be the smaller.
    let unknown = quota(0, 5, None, None, Requests);
    assert_eq!(fold_all(&[small, unknown]).limit(), None);
    // A smaller token quota binds: none; a larger one does not.
    let few_tokens = quota(0, 5, Some(5), None, Tokens);
    assert_eq!(fold_all(&[small, few_tokens]).limit(), None);
    let many_tokens = quota(0, 5, Some(150_000), None, Tokens);
    assert_eq!(fold_all(&[small, many_tokens]).limit(), Some(10));
    // The same quota in tokens: none.
    let same_tokens = quota(0, 5, Some(10), Some(1), Tokens);
    assert_eq!(fold_all(&[small, same_tokens]).limit(), None);
    // The same quota, two windows: the longer, an unstated one first.
    let longer = quota(0, 5, Some(10), Some(60), Requests);
    let h = fold_all(&[small, longer]);
    assert_eq!(
        (h.limit(), h.window()),
        (Some(10), Some(Duration::from_secs(60)))
    );
    let unstated = quota(0, 5, Some(10), None, Requests);
    let h = fold_all(&[small, longer, unstated]);
    assert_eq!((h.limit(), h.window()), (Some(10), None));
}

#[test]
fn concurrency_folds_apart() {
    let inflight = |r, q| quota(r, 5, Some(q), None, Unit::Concurrent);
    let minute = quota(50, 30, Some(60), Some(60), Unit::Requests);
    let h = fold_all(&[inflight(0, 8), minute, inflight(1, 4)]);
    assert_eq!(h.concurrency(), Some(4));
    assert_eq!(h.remaining(), Some(50));
    assert_eq!(h.reset(), Some(Duration::from_secs(30)));
    assert!(!h.exhausted());
    assert_eq!(h.retry_in(), None);
    assert_eq!(h.limit(), Some(60));
    // A cap alone is a usable hint.
    let mut f = Fold::default();
    f.concurrency(3);
    let h = f.finish();
    assert_eq!(h.concurrency(), Some(3));
    assert_eq!(h.remaining(), None);
    assert!(!h.is_empty());
}

#[test]
fn other_units_give_no_count_but_their_wait() {
    let bytes = |r, t| quota(r, t, Some(65_536), Some(60), Unit::Other);
    let minute = quota(50, 30, Some(60), Some(60), Unit::Requests);
    let h = fold_all(&[bytes(10, 40), minute]);
    assert_eq!(h.remaining(), Some(50));
    assert_eq!(h.reset(), Some(Duration::from_secs(30)));
    assert_eq!(h.limit(), Some(60));
    assert!(fold_all(&[bytes(10, 40)]).is_empty());
    // Spent: a wait, and no count.
    let h = fold_all(&[bytes(0, 40), minute]);
    assert!(h.exhausted());
    assert_eq!(h.remaining(), Some(50));
    assert_eq!(h.reset(), Some(Duration::from_secs(40)));
    assert_eq!(h.retry_in(), Some(Duration::from_secs(40)));
    // The reset is the bytes': the request quota does not renew then.
    assert_eq!((h.limit(), h.window()), (None, None));
    // A spent request limit beside it still gives its quota.
    let spent = quota(0, 30, Some(60), Some(60), Unit::Requests);
    let h = fold_all(&[bytes(0, 40), spent]);
    assert_eq!(h.reset(), Some(Duration::from_secs(40)));
    assert_eq!(h.limit(), Some(60));
    let h = fold_all(&[bytes(0, 40)]);
    assert_eq!(h.remaining(), None);
    assert!(h.exhausted());
    assert_eq!(h.retry_in(), Some(Duration::from_secs(40)));
}
