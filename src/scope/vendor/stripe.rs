//! Stripe: the object a request names, the one a `lock_timeout` says was
//! busy.
//!
//! Stripe locks an object while a request (or a process of its own)
//! changes it, and answers another request that meets the lock with `429`
//! `lock_timeout` and `Stripe-Should-Retry: true`. That refusal is the
//! object's, not the account's: it holds the object's requests only.

use std::time::Duration;

use super::{bounded, digest, push_hex};
use crate::Quota;
use crate::scope::MAX_SCOPE_LEN;

/// How every scope [`stripe_object`] names begins.
const OBJECT: &str = "object:";

/// The pace of a Stripe object's limit (a scope only once a `lock_timeout`
/// named it): one request at a time, a bucket of one refilled every
/// 125 ms. A lock lasts as long as the request holding it, and a
/// `lock_timeout` holds the object for four of these intervals, half a
/// second: the first retry delay of Stripe's SDKs. Two updates of one
/// object never leave together into its lock again.
pub(crate) const OBJECT_PACE: Quota = Quota::new(1, Duration::from_millis(125)).refilled();

/// Whether `scope` is one [`stripe_object`] names.
pub(crate) fn is_object(scope: &str) -> bool {
    scope.starts_with(OBJECT)
}

/// The scope of the object a request to `path` names, with `key` its
/// idempotency key if it has one:
///
/// - its path up to its first id, the API version dropped
///   (`/v1/customers/cus_NffrFeUfNV2Hib/sources` is
///   `object:customers/cus_NffrFeUfNV2Hib`), an id being a segment with an
///   `_` and a digit or a capital letter, as Stripe writes its ids (a
///   resource's name, `payment_intents`, has neither);
/// - a path naming no id (a create, `POST /v1/customers`): its
///   idempotency key, as a digest (a key may be guessable, and scopes are
///   logged): `object:key:` and 16 hex digits;
/// - neither: the path, the query dropped (`object:path:/v1/customers`).
///
/// At most [`MAX_SCOPE_LEN`] bytes (a longer one keeps its head and ends
/// with `~` and a digest of the whole).
pub(crate) fn stripe_object(path: &str, key: Option<&str>) -> String {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let mut segments = path.split('/').filter(|s| !s.is_empty()).peekable();
    segments.next_if(|s| matches!(*s, "v1" | "v2"));
    let mut object = String::from(OBJECT);
    for (i, segment) in segments.enumerate() {
        if i > 0 {
            object.push('/');
        }
        object.push_str(segment);
        if is_id(segment) {
            return bounded(object, MAX_SCOPE_LEN);
        }
    }
    match key {
        Some(key) => {
            let mut scope = format!("{OBJECT}key:");
            push_hex(&mut scope, &digest(key.as_bytes()).to_be_bytes());
            scope
        }
        None => bounded(format!("{OBJECT}path:{path}"), MAX_SCOPE_LEN),
    }
}

/// A Stripe id: a prefix, `_`, and letters and digits with at least one
/// digit or capital (`cus_NffrFeUfNV2Hib`, `pi_3MtwBw`).
fn is_id(segment: &str) -> bool {
    let Some((prefix, rest)) = segment.split_once('_') else {
        return false;
    };
    !prefix.is_empty()
        && !rest.is_empty()
        && rest
            .bytes()
            .any(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_is_the_path_up_to_its_first_id() {
        assert_eq!(
            stripe_object("/v1/customers/cus_NffrFeUfNV2Hib", None),
            "object:customers/cus_NffrFeUfNV2Hib"
        );
        assert_eq!(
            stripe_object("/v1/customers/cus_001/sources/card_9?expand=x", Some("k")),
            "object:customers/cus_001"
        );
        assert_eq!(
            stripe_object("/v1/payment_intents/pi_3MtwBw/confirm", None),
            "object:payment_intents/pi_3MtwBw"
        );
    }

    #[test]
    fn a_path_naming_no_id_is_its_key_as_a_digest_else_the_path() {
        let by_key = stripe_object("/v1/payment_intents", Some("order-42"));
        assert!(by_key.starts_with("object:key:"), "{by_key}");
        assert!(!by_key.contains("order-42"));
        assert_ne!(
            by_key,
            stripe_object("/v1/payment_intents", Some("order-43"))
        );
        assert_eq!(
            stripe_object("/v1/payment_intents?x=1", None),
            "object:path:/v1/payment_intents"
        );
        for scope in [by_key, stripe_object("/v1/customers/cus_1", None)] {
            assert!(is_object(&scope), "{scope}");
        }
        assert!(!is_object("tenant-7"));
        assert!(stripe_object(&"/v1/x".repeat(40), None).len() <= MAX_SCOPE_LEN);
    }
}
