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
/// A Stripe object's limit (see [`vendor::stripe::OBJECT_PACE`]) takes
/// its pace unless one is declared for it.
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
    if pacing.declared.is_none()
        && policy.rate_limit_headers.scoping().stripe
        && let (_, Some(scope)) = key::split(key)
        && vendor::stripe::is_object(scope)
    {
        pacing.declared = Some(vendor::stripe::OBJECT_PACE);
        return pacing;
    }
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
/// # Many limits per origin
///
/// Real APIs run several limits on one host at once, each over its own part of the traffic. A
/// request falls under a **set of limits**: its origin's (silent limiters, global limits, a quota
/// declared for the origin) and, when it has one, its **scope's** (a GitHub resource, a Discord
/// bucket, an IETF partition, a scope you declare). Each limit is a gate, a quota and a pace of its
/// own; the request leaves when every one admits it. Its scope is asked first (it holds most often:
/// a bucket or a resource spent), its origin last, right before the send, so a task that waits for
/// its scope never holds a paced slot of its origin. A limit that makes the task wait makes it ask
/// all again after, giving back what the others granted meanwhile (a unit, cost units; the wait for
/// an origin's first answer keeps them, as it may be the scope's own first contact). On a store
/// whose calls take a round trip (Redis), the origin is asked beside a read of the scope's gate, so
/// a pushback recorded while the first answer was on its way still holds the task. An answer
/// updates the limit it speaks for; the others learn that it got through. The set is computed in
/// one place, `src/scope/set.rs`.
///
/// | rule | a request's scope | what an answer speaks for |
/// |---|---|---|
/// | `Scope::new("tenant-7")` (request extension), `Policy::scope_rule(origin, method, path_prefix, scope)` | the declared scope (the extension wins over a rule, a rule over a preset) | its scope, pushbacks included |
/// | `Policy::github()` (`RateLimitHeaders::github()`) | the resource its route's last answer named (`x-ratelimit-resource`), else the one GitHub documents for the path (`/search/code`: `code_search`, `/search/…`: `search`, `/graphql`: `graphql`, …, else `core`) | the named resource; a pushback with `retry-after` (the secondary limit), a `503`, or an answer naming no resource: the origin |
/// | `Policy::discord()` (`RateLimitHeaders::discord()`) | the bucket (`X-RateLimit-Bucket`) its route's last answer named, with the route's major parameter (channel, guild, webhook), as discord.js and twilight key it; before that the route with its major parameter, one request at a time (the first contact of its limit) | the bucket; a `429` with `X-RateLimit-Global` or scope `global`, a `503`, or an answer naming no bucket: the origin |
/// | `RateLimitHeaders::ietf()` (default) | the partition (`pk`) its path's last answer named, once one did; at an origin known to partition, a path not mapped yet is its own route, one request at a time until its answer names its partition | the partition its `RateLimit` names; none named: the origin |
///
///
/// Quotas declared per scope: `Policy::scope_quota(origin, scope, Quota)`; a quota declared for the
/// origin (`Policy::quota`) binds all its scopes together. An origin has at most
/// `Policy::max_scopes(n)` scopes (default 256, counted per process; unused ones make room after
/// five minutes); a request whose scope would be past them falls under its origin's limit alone, so
/// a server naming a new bucket in every answer costs a bounded map. `max_scopes(0)` turns scopes
/// off. Stores keep each limit as one value under `origin#scope`; the Redis store keeps a scope's
/// key in its origin's slot (`{prefix}origin:{<origin hash>}:<scope hash>`).
///
/// ```
/// use http::Method;
/// use reqwest_backpressure::{Policy, Quota, Scope};
///
/// // GitHub: core and search each at their own quota, read from the answers.
/// let github = Policy::github();
///
/// // Your own API: tenants limited apart, searches apart, 100 a second for all.
/// let mine = Policy::default()
///     .quota("https://api.example.com", Quota::per_second(100))
///     .scope_quota("https://api.example.com", "tenant-7", Quota::per_second(10))
///     .scope_rule("https://api.example.com", Some(Method::GET), "/v1/search", "search")
///     .scope_quota("https://api.example.com", "search", Quota::per_minute(30));
/// // ... and on each request of tenant 7: `.with_extension(Scope::new("tenant-7"))`.
/// # drop((github, mine, Scope::new("tenant-7")));
/// ```
///
/// `discord()` also holds each origin it reads to Discord's documented global limit, 50 requests a
/// second, once the origin answered as Discord does (its first answer names a bucket): kept as a
/// bucket refilled at that rate, unless a quota is declared for the origin (which wins); Discord's
/// interactions (`/interactions/…/callback`, `/webhooks/{application}/{token}`) are not held by it,
/// as Discord documents.
///
/// A declared scope is the caller's knowledge that the server limits it apart: its pushbacks, even a
/// bare `429`, hold the scope, not the origin (a quota declared for the origin still binds every
/// scope).
///
/// No API needs `origin_gate(false)` for per-path or per-user limits any more: declare the scope, or
/// use the preset that reads it.
///
/// # Example
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
