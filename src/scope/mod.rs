//! Scopes: the parts of an origin's traffic that a limit of their own
//! covers (a GitHub resource, a Discord bucket, an IETF partition, a
//! declared scope), and the set of limits a request falls under.
//!
//! A request falls under its origin's limit (silent limiters, global
//! limits, quotas declared for the origin) and, when it has one, under its
//! scope's limit; it leaves when both admit it. Which scope is decided in
//! one place, [`Route::scope`]; which limit an answer speaks for, in
//! [`Route::answered`].

use std::sync::Arc;

pub(crate) mod key;
mod map;
mod set;
pub(crate) mod vendor;

pub use key::MAX_SCOPE_LEN;
pub(crate) use map::ScopeMap;
pub(crate) use set::{Answer, Answered, Origin, Route};

use crate::origin::PacingConfig;
use crate::policy::Policy;

/// Discord's global limit: 50 requests a second per bot, across every
/// route, as its developer docs state. Kept as a bucket refilled at that
/// rate (bursts of up to 50, as the buckets under it reset together), not
/// as windows of 50 a second apart: paced in such windows, a burst of 25
/// when the buckets reset took a window's slots, and the next burst
/// waited for the window after (1.6× slower than the buckets allow).
pub(crate) const DISCORD_GLOBAL: crate::Quota = crate::Quota::per_second(50).refilled();

/// The settings of the limit `key` (see [`key::limit_key`]): the policy's,
/// and for the origin's own limit of an API whose preset documents a
/// global quota (Discord's 50 a second), that quota unless one is
/// declared, once the origin answered as that API does (the first
/// contact holds the rest until then).
/// An origin whose answers state a leaky bucket (Shopify's call limit,
/// read by [`RateLimitHeaders::shopify_leaking`](crate::RateLimitHeaders::shopify_leaking))
/// is paced as a declared bucket at the declared rate, its burst what the
/// last statement left free, leaked since (see `LeakyBucket::quota`),
/// unless a quota is declared for it.
/// A request that does not count against that global limit
/// (`under_global`: false, see [`Route::under_global_limit`]) is not held
/// by it.
pub(crate) fn pacing_config(
    policy: &Policy,
    map: &ScopeMap,
    key: &str,
    under_global: bool,
) -> PacingConfig {
    let mut pacing = policy.pacing_config(key);
    if under_global
        && pacing.declared.is_none()
        && policy.rate_limit_headers.scoping().discord
        && policy.scopes.max > 0
        && let (origin, None) = key::split(key)
        && map.knows(origin)
    {
        pacing.declared = Some(DISCORD_GLOBAL);
    }
    if pacing.declared.is_none()
        && let Some(bucket) = policy.rate_limit_headers.leaky_bucket()
        && let (origin, None) = key::split(key)
        && let Some(stated) = map.bucket(origin)
    {
        pacing.declared = bucket.quota(stated.size, stated.used, stated.at.elapsed());
    }
    pacing
}

/// Request extension: the scope of its origin the request falls under,
/// named by the caller: a tenant, an API key, an object, any part of the
/// traffic the server limits apart. The request leaves when its scope's
/// limit (the quotas declared for it with
/// [`Policy::scope_quota`](crate::Policy::scope_quota), what its answers
/// state, its pushbacks) and its origin's limit both admit it. Its
/// answers speak for its scope: a pushback holds the scope, not the
/// origin. A scope a rule of the policy would give
/// ([`Policy::scope_rule`](crate::Policy::scope_rule)) or a preset would
/// learn gives way to this one.
///
/// The name is kept as printable ASCII (other characters and `#` become
/// `_`), at most [`MAX_SCOPE_LEN`] bytes; logs and metrics may show it,
/// so never put a secret in it.
///
/// ```
/// use reqwest_backpressure::Scope;
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// let response = client
///     .get("https://api.example.com/v1/reports")
///     .with_extension(Scope::new("tenant-7"))
///     .send()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope(Arc<str>);

impl Scope {
    /// The scope named `name` (cleaned as above; an empty name is the
    /// scope `_`).
    pub fn new(name: impl AsRef<str>) -> Self {
        let cleaned = key::clean(name.as_ref());
        if cleaned.is_empty() {
            Scope(Arc::from("_"))
        } else {
            Scope(Arc::from(cleaned))
        }
    }

    /// The scope's name, as kept.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
#[cfg(test)]
mod tests;
