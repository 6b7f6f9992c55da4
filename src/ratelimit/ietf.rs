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
//! - draft-07: `RateLimit` is a Dictionary `limit=100, remaining=50,
//!   reset=5`, all three non-negative Integers: one limit.
//! - draft-06 and earlier: separate `RateLimit-Remaining` and
//!   `RateLimit-Reset` Integer fields (the reset a delay in seconds): one
//!   limit. `RateLimit-Limit` carries no reset or count left and is not read.
//!
//! The two `RateLimit` shapes cannot both parse: a Dictionary member with a
//! value needs a top-level `=`, which a List never has. `RateLimit-Policy`
//! only describes quotas (`"burst";q=100;w=60`); it never says how much is
//! left or when it resets, so it is not read.

use std::time::Duration;

use http::HeaderMap;
use http::header::HeaderName;
use sfv::{BareItem, Dictionary, FieldType, Item, List, ListEntry, Parser};

use super::hint::{Fold, Limit};
use super::reset::MAX_RATELIMIT_LEN;

/// Most policies read from one `RateLimit` list; a longer list is ignored.
pub(crate) const MAX_POLICIES: usize = 16;

const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
const RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

/// Reads every IETF form present into `fold`.
pub(crate) fn read(headers: &HeaderMap, fold: &mut Fold) {
    // Every name read here starts with `ratelimit`: one pass over the
    // names, instead of three lookups, for the many answers that carry
    // none of them.
    if !headers
        .keys()
        .any(|name| name.as_str().starts_with("ratelimit"))
    {
        return;
    }
    if let Some(value) = combined(headers, &RATELIMIT) {
        ratelimit_field(&value, fold);
    }
    let remaining = integer_field(headers, &RATELIMIT_REMAINING);
    let reset = integer_field(headers, &RATELIMIT_RESET).map(Duration::from_secs);
    if remaining.is_some() || reset.is_some() {
        fold.push(Limit::new(remaining, reset));
    }
}

/// All field lines of `name` joined with `", "`, as RFC 9651 §4.2 combines
/// them; `None` when absent or longer than [`MAX_RATELIMIT_LEN`] bytes.
fn combined(headers: &HeaderMap, name: &HeaderName) -> Option<Vec<u8>> {
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

/// A field whose value is one non-negative Integer Item (parameters allowed
/// and ignored, as RFC 9651 lets them be).
fn integer_field(headers: &HeaderMap, name: &HeaderName) -> Option<u64> {
    let value = combined(headers, name)?;
    let item = Item::parse(Parser::new(&value)).ok()?;
    non_negative(&item.bare_item)
}

/// The `RateLimit` field: a draft-10 List or a draft-07 Dictionary.
fn ratelimit_field(value: &[u8], fold: &mut Fold) {
    if let Ok(list) = List::parse(Parser::new(value)) {
        if list.len() <= MAX_POLICIES {
            list.iter().filter_map(policy).for_each(|l| fold.push(l));
        }
        return;
    }
    let dict = Dictionary::parse(Parser::new(value));
    if let Some(limit) = dict.ok().as_ref().and_then(draft07) {
        fold.push(limit);
    }
}

/// One draft-10 policy item: a string or token with `r` and optional `t`.
fn policy(entry: &ListEntry) -> Option<Limit> {
    let ListEntry::Item(item) = entry else {
        return None;
    };
    if item.bare_item.as_string().is_none() && item.bare_item.as_token().is_none() {
        return None;
    }
    let remaining = non_negative(item.params.get("r")?)?;
    let reset = match item.params.get("t") {
        None => None,
        Some(t) => Some(Duration::from_secs(non_negative(t)?)),
    };
    Some(Limit::new(Some(remaining), reset))
}

/// The draft-07 Dictionary: `limit`, `remaining` and `reset`, all
/// non-negative Integers; other members are ignored.
fn draft07(dict: &Dictionary) -> Option<Limit> {
    let member = |key: &str| match dict.get(key) {
        Some(ListEntry::Item(item)) => non_negative(&item.bare_item),
        _ => None,
    };
    member("limit")?;
    Some(Limit::new(
        Some(member("remaining")?),
        Some(Duration::from_secs(member("reset")?)),
    ))
}
