//! The IETF `RateLimit` fields, parsed as Structured Fields (RFC 9651).
//!
//! Three drafts are in the wild, and each shape is accepted only when it
//! fits exactly:
//!
//! - draft-10 (and express-rate-limit's draft-8): `RateLimit` is a List of
//!   policies, each an sf-string or token with `r` (remaining, required) and
//!   `t` (seconds to reset, optional) non-negative Integer parameters:
//!   `"burst";r=50;t=30, "daily";r=900;t=86000`. An item of another shape is
//!   skipped; a list of more than [`MAX_POLICIES`] is ignored whole.
//!   `RateLimit-Policy` is a List of the same names with their quotas:
//!   `q` (the quota, a required non-negative Integer), `w` (the window in
//!   seconds, an optional non-negative Integer), `qu` (the unit, an
//!   optional sf-string: `"requests"`, the default, `"content-bytes"` or
//!   `"concurrent-requests"`; any other string is an unknown unit) and `pk`
//!   (ignored). A `RateLimit` item takes the quota, window and unit of the
//!   one policy of the same name (a string and a token of the same text
//!   are the same name); with none, or with two, it has no quota and counts
//!   requests. A policy of another shape is skipped; a list of more than
//!   [`MAX_POLICIES`] is ignored whole. A `concurrent-requests` policy
//!   gives its quota as a concurrency cap whether or not `RateLimit`
//!   reports on it; any other policy says nothing alone.
//! - draft-07: `RateLimit` is a Dictionary `limit=100, remaining=50,
//!   reset=5`, all three non-negative Integers: one limit, of quota
//!   `limit` (no window).
//! - draft-06 and earlier: separate `RateLimit-Remaining` and
//!   `RateLimit-Reset` Integer fields (the reset a delay in seconds): one
//!   limit. `RateLimit-Limit` gives its quota: a non-negative Integer,
//!   optionally with a `w` window in seconds (`10;w=1`), or the first
//!   member of a List of such (draft-03's `10, 10;w=1, 50;w=60`, where a
//!   first member without `w` takes the window of the later members of the
//!   same quota, when they agree on one). A `RateLimit-Limit` that does not
//!   fit, or a List of more than [`MAX_POLICIES`], gives no quota; the
//!   integer `RateLimit-Policy` of these drafts (`100;w=60`) is not read.
//!
//! The two `RateLimit` shapes cannot both parse: a Dictionary member with a
//! value needs a top-level `=`, which a List never has. How the limits fold
//! (a concurrency or content-bytes policy is not a count of requests left)
//! is told on [`RateLimitHint`](super::RateLimitHint).

use std::time::Duration;

use http::HeaderMap;
use http::header::HeaderName;
use sfv::{BareItem, Dictionary, FieldType, Item, List, ListEntry, Parser};

use super::hint::{Fold, Limit, Unit};
use super::reset::MAX_RATELIMIT_LEN;

/// Most policies read from one `RateLimit` or `RateLimit-Policy` list (or
/// members from one `RateLimit-Limit` list); a longer list is ignored.
pub(crate) const MAX_POLICIES: usize = 16;

const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
const RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
const RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

/// What one `RateLimit-Policy` item states.
#[derive(Debug, Clone, Copy)]
struct Quota {
    quota: u64,
    window: Option<Duration>,
    unit: Unit,
}

/// The well-formed `RateLimit-Policy` items, by name, in a fixed array: no
/// allocation beyond the parse.
type Policies<'a> = [Option<(&'a str, Quota)>; MAX_POLICIES];

/// Reads every IETF form present into `fold`.
pub(crate) fn read(headers: &HeaderMap, fold: &mut Fold) {
    // Every name read here starts with `ratelimit`: one pass over the
    // names, instead of several lookups, for the many answers that carry
    // none of them.
    if !headers
        .keys()
        .any(|name| name.as_str().starts_with("ratelimit"))
    {
        return;
    }
    let policy_list = combined(headers, &RATELIMIT_POLICY)
        .and_then(|value| List::parse(Parser::new(&value)).ok())
        .filter(|list| list.len() <= MAX_POLICIES)
        .unwrap_or_default();
    let mut policies: Policies<'_> = [None; MAX_POLICIES];
    for (slot, entry) in policies.iter_mut().zip(&policy_list) {
        *slot = quota_policy(entry);
        if let Some((_, q)) = slot
            && q.unit == Unit::Concurrent
        {
            fold.concurrency(q.quota);
        }
    }
    if let Some(value) = combined(headers, &RATELIMIT) {
        ratelimit_field(&value, &policies, fold);
    }
    let remaining = integer_field(headers, &RATELIMIT_REMAINING);
    let reset = integer_field(headers, &RATELIMIT_RESET).map(Duration::from_secs);
    if remaining.is_some() || reset.is_some() {
        let (quota, window) = match limit_field(headers) {
            Some((quota, window)) => (Some(quota), window),
            None => (None, None),
        };
        fold.push(Limit {
            quota,
            window,
            ..Limit::new(remaining, reset)
        });
    }
}

/// All field lines of `name` joined with `", "`, as RFC 9651 §4.2 combines
/// them; `None` when absent or longer than [`MAX_RATELIMIT_LEN`] bytes.
pub(crate) fn combined(headers: &HeaderMap, name: &HeaderName) -> Option<Vec<u8>> {
    let mut joined = Vec::new();
    for (i, line) in headers.get_all(name).iter().enumerate() {
        if i > 0 {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(line.as_bytes());
        if joined.len() > MAX_RATELIMIT_LEN {
            return None;
        }
    }
    (!joined.is_empty()).then_some(joined)
}

/// A non-negative sf-integer.
fn non_negative(item: &BareItem) -> Option<u64> {
    item.as_integer().and_then(|i| u64::try_from(i).ok())
}

/// An optional parameter of non-negative Integer seconds: `Some(None)` when
/// absent, `None` when present and not one.
fn seconds(item: &Item, key: &str) -> Option<Option<Duration>> {
    match item.params.get(key) {
        None => Some(None),
        Some(value) => Some(Some(Duration::from_secs(non_negative(value)?))),
    }
}

/// A policy's name: an sf-string or a token, compared by text.
fn name(item: &BareItem) -> Option<&str> {
    match (item.as_string(), item.as_token()) {
        (Some(string), _) => Some(string.as_str()),
        (None, Some(token)) => Some(token.as_str()),
        (None, None) => None,
    }
}

/// A field whose value is one non-negative Integer Item (parameters allowed
/// and ignored, as RFC 9651 lets them be).
fn integer_field(headers: &HeaderMap, name: &HeaderName) -> Option<u64> {
    let value = combined(headers, name)?;
    let item = Item::parse(Parser::new(&value)).ok()?;
    non_negative(&item.bare_item)
}

/// The draft-06 `RateLimit-Limit`: a quota, and its window when stated.
fn limit_field(headers: &HeaderMap) -> Option<(u64, Option<Duration>)> {
    let value = combined(headers, &RATELIMIT_LIMIT)?;
    let list = List::parse(Parser::new(&value)).ok()?;
    if list.len() > MAX_POLICIES {
        return None;
    }
    let (ListEntry::Item(first), rest) = list.split_first()? else {
        return None;
    };
    let quota = non_negative(&first.bare_item)?;
    if let Some(window) = seconds(first, "w")? {
        return Some((quota, Some(window)));
    }
    // draft-03: `10, 10;w=1, 50;w=60`, the first member's policy among
    // the rest. Members that do not fit, or give no window, are skipped;
    // two windows for the same quota leave it unknown.
    let mut windows = rest.iter().filter_map(|entry| match entry {
        ListEntry::Item(item) if non_negative(&item.bare_item) == Some(quota) => {
            seconds(item, "w").flatten()
        }
        _ => None,
    });
    let window = windows.next();
    let agreed = window.filter(|&w| windows.all(|other| other == w));
    Some((quota, agreed))
}

/// The `RateLimit` field: a draft-10 List or a draft-07 Dictionary.
fn ratelimit_field(value: &[u8], policies: &Policies<'_>, fold: &mut Fold) {
    if let Ok(list) = List::parse(Parser::new(value)) {
        if list.len() <= MAX_POLICIES {
            for (name, limit) in list.iter().filter_map(policy) {
                fold.push(with_policy(limit, name, policies));
            }
        }
        return;
    }
    let dict = Dictionary::parse(Parser::new(value));
    if let Some(limit) = dict.ok().as_ref().and_then(draft07) {
        fold.push(limit);
    }
}

/// `limit` with the quota, window and unit of the one policy named `name`
/// (none, or two: no quota, in requests).
fn with_policy(limit: Limit, name: &str, policies: &Policies<'_>) -> Limit {
    let mut named = policies
        .iter()
        .flatten()
        .filter(|(policy, _)| *policy == name);
    match (named.next(), named.next()) {
        (Some(&(_, q)), None) => Limit {
            quota: Some(q.quota),
            window: q.window,
            unit: q.unit,
            ..limit
        },
        _ => limit,
    }
}

/// One draft-10 policy item: a string or token with `r` and optional `t`.
pub(crate) fn policy(entry: &ListEntry) -> Option<(&str, Limit)> {
    let ListEntry::Item(item) = entry else {
        return None;
    };
    let name = name(&item.bare_item)?;
    let remaining = non_negative(item.params.get("r")?)?;
    let reset = seconds(item, "t")?;
    Some((name, Limit::new(Some(remaining), reset)))
}

/// One draft-10 `RateLimit-Policy` item: a string or token with `q`, and
/// optional `w` and `qu`.
fn quota_policy(entry: &ListEntry) -> Option<(&str, Quota)> {
    let ListEntry::Item(item) = entry else {
        return None;
    };
    let name = name(&item.bare_item)?;
    let quota = non_negative(item.params.get("q")?)?;
    let window = seconds(item, "w")?;
    let unit = match item.params.get("qu") {
        None => Unit::Requests,
        Some(unit) => match unit.as_string()?.as_str() {
            "requests" => Unit::Requests,
            "concurrent-requests" => Unit::Concurrent,
            _ => Unit::Other,
        },
    };
    Some((
        name,
        Quota {
            quota,
            window,
            unit,
        },
    ))
}

/// The draft-07 Dictionary: `limit`, `remaining` and `reset`, all
/// non-negative Integers; other members are ignored.
fn draft07(dict: &Dictionary) -> Option<Limit> {
    let member = |key: &str| match dict.get(key) {
        Some(ListEntry::Item(item)) => non_negative(&item.bare_item),
        _ => None,
    };
    let quota = member("limit")?;
    Some(Limit {
        quota: Some(quota),
        ..Limit::new(
            Some(member("remaining")?),
            Some(Duration::from_secs(member("reset")?)),
        )
    })
}
