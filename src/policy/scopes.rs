//! The scopes a caller declares: which requests of an origin fall under a
//! scope of their own (by method and path), the quotas declared per scope,
//! and how many scopes an origin may have.

use http::Method;

use super::Policy;
use crate::quota::{Quota, Target, most_specific};
use crate::scope::key::clean;

/// How many scopes an origin has at most, by default (see
/// [`Policy::max_scopes`]).
pub const DEFAULT_MAX_SCOPES: usize = 256;

/// What a policy declares of scopes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeclaredScopes {
    /// Origin, scope, quota.
    pub(crate) quotas: Vec<(Target, String, Quota)>,
    /// Requests matching a rule fall under its scope (the latest rule that
    /// matches).
    pub(crate) rules: Vec<ScopeRule>,
    pub(crate) max: usize,
}

impl Default for DeclaredScopes {
    fn default() -> Self {
        DeclaredScopes {
            quotas: Vec::new(),
            rules: Vec::new(),
            max: DEFAULT_MAX_SCOPES,
        }
    }
}

/// Requests to `target` with `method` (any, when `None`) and a path under
/// `prefix` fall under `scope`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScopeRule {
    target: Target,
    method: Option<Method>,
    prefix: String,
    scope: String,
}

impl DeclaredScopes {
    /// The scope a rule puts a request to `origin` in.
    pub(crate) fn rule_for(&self, origin: &str, method: &Method, path: &str) -> Option<&str> {
        self.rules
            .iter()
            .rev()
            .find(|r| {
                r.method.as_ref().is_none_or(|m| m == method)
                    && under(path, &r.prefix)
                    && r.target.matches(origin)
            })
            .map(|r| r.scope.as_str())
    }

    /// The quota declared for `scope` of `origin` in requests (with
    /// `units`: in cost units): for its URL, else for its host, else for
    /// `*`.
    pub(crate) fn quota(&self, origin: &str, scope: &str, units: bool) -> Option<Quota> {
        most_specific(
            self.quotas
                .iter()
                .filter(|(_, s, q)| q.is_units() == units && s == scope)
                .map(|(t, _, q)| (t, *q)),
            origin,
        )
    }

    /// Why these declarations cannot be used, if they cannot.
    pub(crate) fn invalid(&self) -> Option<&'static str> {
        for (target, scope, quota) in &self.quotas {
            if *target == Target::Invalid {
                return Some(
                    "a scope quota's origin is neither scheme://host[:port], a host, nor *",
                );
            }
            if scope.is_empty() {
                return Some("a scope's name is empty");
            }
            if let Some(why) = quota.invalid() {
                return Some(why);
            }
        }
        for rule in &self.rules {
            if rule.target == Target::Invalid {
                return Some(
                    "a scope rule's origin is neither scheme://host[:port], a host, nor *",
                );
            }
            if rule.scope.is_empty() {
                return Some("a scope's name is empty");
            }
            if !rule.prefix.starts_with('/') {
                return Some("a scope rule's path prefix does not start with /");
            }
        }
        None
    }
}

/// Whether `path` is `prefix` or under it (`/v1/charges` is under
/// `/v1/charges` and `/v1/charges/`, not under `/v1/char`).
fn under(path: &str, prefix: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || prefix.ends_with('/') || rest.starts_with('/'),
        None => false,
    }
}

impl Policy {
    /// Declares `quota` for the requests to `origin` (a URL's origin or a
    /// bare host, as in [`quota`](Self::quota)) in `scope`: the scope a
    /// request names with the [`Scope`](crate::Scope) extension or falls
    /// under by a [`scope_rule`](Self::scope_rule). A request in a scope
    /// leaves when its scope's limit and its origin's limit both admit it;
    /// a quota declared for the origin ([`quota`](Self::quota)) binds every
    /// scope together. Declared again for the same origin, scope and unit,
    /// the later declaration replaces the earlier. Invalid as
    /// [`quota`](Self::quota) is, and for an empty scope name.
    ///
    /// ```
    /// use reqwest_backpressure::{Policy, Quota};
    ///
    /// // Each tenant's own 10 a second, under the API's 100 for all.
    /// let policy = Policy::default()
    ///     .quota("https://api.example.com", Quota::per_second(100))
    ///     .scope_quota("https://api.example.com", "tenant-7", Quota::per_second(10));
    /// assert!(policy.validate().is_ok());
    /// assert!(Policy::default().scope_quota("api.example.com", "", Quota::per_second(1)).validate().is_err());
    /// ```
    #[must_use]
    pub fn scope_quota(mut self, origin: &str, scope: &str, quota: Quota) -> Self {
        let target = Target::parse(origin);
        // An empty name stays empty (and the policy invalid).
        let scope = clean(scope);
        self.scopes.quotas.retain(|(t, s, q)| {
            *t != target || *s != scope || *t == Target::Invalid || q.is_units() != quota.is_units()
        });
        self.scopes.quotas.push((target, scope, quota));
        self
    }

    /// Puts the requests to `origin` (as in [`quota`](Self::quota)) with
    /// `method` (`None`: any) whose path is `path_prefix` or under it
    /// (`/v1/charges` covers `/v1/charges/ch_1`, not `/v1/chargesX`) in
    /// `scope`, unless the request names its own with the
    /// [`Scope`](crate::Scope) extension. The latest rule that matches
    /// wins. A prefix that does not start with `/`, or an empty scope name,
    /// make the policy invalid.
    ///
    /// ```
    /// use http::Method;
    /// use reqwest_backpressure::{Policy, Quota};
    ///
    /// let policy = Policy::default()
    ///     .scope_rule("https://api.example.com", Some(Method::POST), "/v1/search", "search")
    ///     .scope_quota("https://api.example.com", "search", Quota::per_minute(30));
    /// assert!(policy.validate().is_ok());
    /// ```
    #[must_use]
    pub fn scope_rule(
        mut self,
        origin: &str,
        method: Option<Method>,
        path_prefix: &str,
        scope: &str,
    ) -> Self {
        self.scopes.rules.push(ScopeRule {
            target: Target::parse(origin),
            method,
            prefix: path_prefix.to_owned(),
            scope: clean(scope),
        });
        self
    }

    /// At most `n` scopes per origin, counted in this process: a scope
    /// past them (a server naming a new bucket in every answer) is not
    /// kept, and the requests that would fall under it fall under their
    /// origin's limit alone. Scopes unused for five minutes make room.
    /// `0`: no scopes at all; every request falls under its origin's
    /// limit, as in a client that knows one limit per origin.
    ///
    /// # Default
    ///
    /// [`DEFAULT_MAX_SCOPES`] (256).
    #[must_use]
    pub fn max_scopes(mut self, n: usize) -> Self {
        self.scopes.max = n;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_matches_its_method_and_the_paths_under_its_prefix() {
        let policy = Policy::default()
            .scope_rule(
                "https://a.example",
                Some(Method::POST),
                "/v1/charges",
                "charges",
            )
            .scope_rule("a.example", None, "/search/", "search");
        let s = &policy.scopes;
        let o = "https://a.example:443";
        assert_eq!(
            s.rule_for(o, &Method::POST, "/v1/charges/ch_1"),
            Some("charges")
        );
        assert_eq!(s.rule_for(o, &Method::POST, "/v1/charges"), Some("charges"));
        assert_eq!(s.rule_for(o, &Method::POST, "/v1/chargesX"), None);
        assert_eq!(s.rule_for(o, &Method::GET, "/v1/charges"), None);
        assert_eq!(s.rule_for(o, &Method::GET, "/search/code"), Some("search"));
        assert_eq!(
            s.rule_for("http://a.example:80", &Method::GET, "/search/x"),
            Some("search")
        );
        assert_eq!(
            s.rule_for("https://b.example:443", &Method::GET, "/search/x"),
            None
        );
    }

    #[test]
    fn a_scope_quota_replaces_only_its_own_scope_and_unit() {
        let o = "https://a.example:443";
        let policy = Policy::default()
            .scope_quota(o, "t1", Quota::per_second(5))
            .scope_quota(o, "t2", Quota::per_second(7))
            .scope_quota(o, "t1", Quota::per_second(9));
        assert_eq!(
            policy.scopes.quota(o, "t1", false),
            Some(Quota::per_second(9))
        );
        assert_eq!(
            policy.scopes.quota(o, "t2", false),
            Some(Quota::per_second(7))
        );
        assert_eq!(policy.scopes.quota(o, "t3", false), None);
        assert_eq!(policy.scopes.quota(o, "t1", true), None);
    }

    #[test]
    fn a_star_quota_covers_the_origins_nothing_more_specific_does() {
        let o = "https://a.example:443";
        let other = "https://b.example:443";
        let quota = |p: &Policy, key: &str| p.pacing_config(key).declared;
        let star = Policy::default().quota("*", Quota::per_second(100));
        assert_eq!(quota(&star, o), Some(Quota::per_second(100)));
        assert_eq!(quota(&star, other), Some(Quota::per_second(100)));
        // A host or a URL wins over `*`, whichever was declared first.
        let host = Policy::default()
            .quota("a.example", Quota::per_second(25))
            .quota("*", Quota::per_second(100));
        assert_eq!(quota(&host, o), Some(Quota::per_second(25)));
        assert_eq!(quota(&host, other), Some(Quota::per_second(100)));
        let url = star
            .clone()
            .quota("a.example", Quota::per_second(25))
            .quota("https://a.example", Quota::per_second(5));
        assert_eq!(quota(&url, o), Some(Quota::per_second(5)));
        // Declared again, `*` replaces `*`.
        let again = star.quota("*", Quota::per_second(25));
        assert_eq!(quota(&again, other), Some(Quota::per_second(25)));
        assert!(again.validate().is_ok());
        // A scope's quota for `*`, and a scope rule for `*`.
        let scoped = Policy::default()
            .scope_quota("*", "search", Quota::per_minute(30))
            .scope_rule("*", None, "/search", "search");
        assert_eq!(
            scoped.scopes.quota(o, "search", false),
            Some(Quota::per_minute(30))
        );
        assert_eq!(
            scoped.scopes.rule_for(o, &Method::GET, "/search/x"),
            Some("search")
        );
        assert!(scoped.validate().is_ok());
        for bad in ["**", "*.example.com", "* x"] {
            let p = Policy::default().quota(bad, Quota::per_second(1));
            assert!(p.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn unusable_declarations_make_the_policy_invalid() {
        let bad = [
            Policy::default().scope_quota("not a host", "s", Quota::per_second(1)),
            Policy::default().scope_quota("a.example", "", Quota::per_second(1)),
            Policy::default().scope_rule("a.example", None, "v1", "s"),
            Policy::default().scope_rule("a.example", None, "/v1", ""),
            Policy::default().scope_rule("::", None, "/v1", "s"),
        ];
        for policy in bad {
            assert!(policy.validate().is_err(), "{policy:?}");
        }
        assert!(Policy::default().max_scopes(0).validate().is_ok());
    }
}
