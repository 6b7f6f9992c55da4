//! [`ScopeMap`]: what this process learned of each origin's scopes: which
//! scope a route's answers named (a GitHub resource, a Discord bucket, an
//! IETF partition), and which scopes it knows, at most a bounded number per
//! origin.
//!
//! Process-local, as discord.js and twilight keep their route-to-bucket
//! maps: each worker learns a route's scope from its first answer there,
//! and the limits themselves (gates, quotas, paces) are shared through the
//! store under their keys.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::util::lock;

/// How long a scope unused is kept: as long as the store keeps an idle
/// origin's state.
const SCOPE_IDLE: Duration = crate::origin::ORIGIN_IDLE;

/// How many origins are remembered before the idle ones are forgotten.
const ORIGINS_KEPT: usize = 1024;

/// The routes and scopes learned per origin.
#[derive(Debug, Default)]
pub(crate) struct ScopeMap {
    origins: Mutex<HashMap<String, Learned>>,
    /// Whether anything was learned yet (the success path of a client
    /// whose servers name no scope takes no lock).
    any: AtomicBool,
    /// Whether any origin stated a leaky bucket yet.
    buckets: AtomicBool,
}

/// A leaky bucket an answer stated: `used` of `size`, when it was
/// received (on tokio's clock, which a simulation pauses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatedBucket {
    pub(crate) size: u64,
    pub(crate) used: u64,
    pub(crate) at: tokio::time::Instant,
}

/// What was learned of one origin.
#[derive(Debug, Default)]
struct Learned {
    /// Route -> the scope its last answer named.
    routes: HashMap<String, String>,
    /// Known scope -> when it was last used.
    scopes: HashMap<String, Instant>,
    /// Its leaky bucket, as its last answer stating one said (Shopify's
    /// call limit).
    bucket: Option<StatedBucket>,
    used: Option<Instant>,
}

impl ScopeMap {
    /// The scope `route`'s answers at `origin` named last, if any.
    pub(crate) fn learned(&self, origin: &str, route: &str) -> Option<String> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.origins)
            .get(origin)
            .and_then(|l| l.routes.get(route).cloned())
    }

    /// Whether any route's scope was learned yet, at any origin.
    pub(crate) fn learned_any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Whether any route of `origin` was learned (its answers name
    /// scopes: it is the API its preset is for).
    pub(crate) fn knows(&self, origin: &str) -> bool {
        self.learned_any()
            && lock(&self.origins)
                .get(origin)
                .is_some_and(|l| !l.routes.is_empty())
    }

    /// `route`'s answers at `origin` name the scope it falls under by
    /// default: nothing learned is kept for it.
    pub(crate) fn forget(&self, origin: &str, route: &str) {
        if !self.learned_any() {
            return;
        }
        if let Some(learned) = lock(&self.origins).get_mut(origin) {
            learned.routes.remove(route);
        }
    }

    /// `route`'s answers at `origin` name `scope`. Whether the scope is
    /// kept (see [`admits`](Self::admits)); when it is not, the route's
    /// answers are the origin's.
    pub(crate) fn learn(&self, origin: &str, route: &str, scope: &str, max: usize) -> bool {
        let now = Instant::now();
        let mut origins = lock(&self.origins);
        let learned = entry(&mut origins, origin, now);
        if !admit(learned, scope, max, now) {
            learned.routes.remove(route);
            return false;
        }
        if learned.routes.get(route).is_none_or(|s| s != scope) {
            // Routes are bounded as their scopes are: a route whose scope
            // was forgotten is forgotten with it.
            if learned.routes.len() >= max.saturating_mul(8).max(64) {
                let scopes = &learned.scopes;
                learned.routes.retain(|_, s| scopes.contains_key(s));
                if learned.routes.len() >= max.saturating_mul(8).max(64) {
                    learned.routes.clear();
                }
            }
            learned.routes.insert(route.to_owned(), scope.to_owned());
        }
        self.any.store(true, Ordering::Release);
        true
    }

    /// Whether `origin` may have a limit for `scope`: it is known, or the
    /// origin has fewer than `max` scopes used within the idle time (then
    /// it is known from now on).
    pub(crate) fn admits(&self, origin: &str, scope: &str, max: usize) -> bool {
        let now = Instant::now();
        let mut origins = lock(&self.origins);
        admit(entry(&mut origins, origin, now), scope, max, now)
    }

    /// `origin` answered that its leaky bucket holds `used` of `size`
    /// requests.
    pub(crate) fn bucket_stated(&self, origin: &str, used: u64, size: u64) {
        let stated = StatedBucket {
            size,
            used,
            at: tokio::time::Instant::now(),
        };
        let mut origins = lock(&self.origins);
        entry(&mut origins, origin, Instant::now()).bucket = Some(stated);
        self.buckets.store(true, Ordering::Release);
    }

    /// `origin`'s leaky bucket, as its last answer stating one said.
    pub(crate) fn bucket(&self, origin: &str) -> Option<StatedBucket> {
        if !self.buckets.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.origins).get(origin).and_then(|l| l.bucket)
    }

    /// How many scopes `origin` has.
    #[cfg(test)]
    pub(crate) fn scopes(&self, origin: &str) -> usize {
        lock(&self.origins)
            .get(origin)
            .map_or(0, |l| l.scopes.len())
    }
}

/// The entry of `origin`, made room for.
fn entry<'m>(
    origins: &'m mut HashMap<String, Learned>,
    origin: &str,
    now: Instant,
) -> &'m mut Learned {
    if !origins.contains_key(origin) && origins.len() >= ORIGINS_KEPT {
        origins.retain(|_, l| l.used.is_some_and(|u| now.duration_since(u) < SCOPE_IDLE));
        if origins.len() >= ORIGINS_KEPT {
            origins.clear();
        }
    }
    let learned = origins.entry(origin.to_owned()).or_default();
    learned.used = Some(now);
    learned
}

/// Whether `learned` keeps `scope` (see [`ScopeMap::admits`]).
fn admit(learned: &mut Learned, scope: &str, max: usize, now: Instant) -> bool {
    if let Some(used) = learned.scopes.get_mut(scope) {
        *used = now;
        return true;
    }
    if learned.scopes.len() >= max {
        learned
            .scopes
            .retain(|_, used| now.duration_since(*used) < SCOPE_IDLE);
        if learned.scopes.len() >= max {
            return false;
        }
    }
    learned.scopes.insert(scope.to_owned(), now);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learned_route_names_its_scope() {
        let map = ScopeMap::default();
        assert_eq!(map.learned("o", "GET /a"), None);
        assert!(map.learn("o", "GET /a", "search", 8));
        assert_eq!(map.learned("o", "GET /a").as_deref(), Some("search"));
        assert_eq!(map.learned("other", "GET /a"), None);
        assert!(map.learn("o", "GET /a", "core", 8));
        assert_eq!(map.learned("o", "GET /a").as_deref(), Some("core"));
    }

    #[test]
    fn scopes_past_the_cap_are_refused_and_their_routes_fall_to_the_origin() {
        let map = ScopeMap::default();
        for i in 0..4 {
            assert!(map.learn("o", &format!("r{i}"), &format!("b{i}"), 4));
        }
        assert!(!map.learn("o", "r9", "hostile", 4));
        assert_eq!(map.learned("o", "r9"), None);
        assert!(!map.admits("o", "another", 4));
        assert!(map.admits("o", "b2", 4), "a known scope stays");
        assert_eq!(map.scopes("o"), 4);
        // Another origin has room of its own.
        assert!(map.admits("p", "x", 4));
    }

    #[test]
    fn routes_stay_bounded_however_many_are_learned() {
        let map = ScopeMap::default();
        for i in 0..10_000 {
            map.learn("o", &format!("route {i}"), &format!("b{}", i % 2), 2);
        }
        let origins = lock(&map.origins);
        assert!(
            origins["o"].routes.len() <= 64,
            "{}",
            origins["o"].routes.len()
        );
    }
}
