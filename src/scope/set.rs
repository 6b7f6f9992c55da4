//! [`Route`]: what decides the set of limits a request falls under (its
//! origin's, and its scope's when it has one), and which of them an answer
//! speaks for. The one place where scopes are chosen.
//!
//! | rule | a request's scope | an answer speaks for |
//! |---|---|---|
//! | declared ([`Scope`](crate::Scope), [`Policy::scope_rule`](crate::Policy::scope_rule)) | the declared scope | the declared scope, pushbacks included |
//! | GitHub (`x-ratelimit-resource`) | the resource its last answer on this route named, else the one GitHub documents for the path | the named resource; a pushback with `retry-after` (the secondary limit), or naming no resource, holds the origin |
//! | Discord (`X-RateLimit-Bucket`) | the bucket the route's last answer named, with the route's major parameter; before that the route itself (one request at a time, the first contact of its limit) | the bucket; a `429` with `X-RateLimit-Global` or scope `global`, or naming no bucket, holds the origin |
//! | Stripe (`Stripe-Should-Retry`) | its object's, once an answer said the object was busy; before that none: the origin's limit alone | a pushback carrying `Stripe-Should-Retry` (a `lock_timeout`): its object; any other answer: the origin |
//! | IETF (`pk`) | the partition the path's last answer named; at an origin known to partition, an unmapped path its own route (one request at a time until its answer names its partition) | the partition its `RateLimit` names; none named: the origin |
//! | none of these | none: the origin's limit alone | the origin |
//!
//! The limits of the request's set that an answer does not speak for
//! learn that it got through (their first contact ends, their pace counts
//! it).

use http::{HeaderMap, Method, StatusCode};

use super::ScopeMap;
use super::vendor::{self, DiscordScope};
use crate::policy::Policy;
use crate::ratelimit::Scoping;

/// What a request's scope follows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// The caller named it.
    Declared(String),
    /// GitHub's resources; the one GitHub documents for the path.
    GitHub(&'static str),
    /// Discord's buckets, keyed with the route's major parameter; and
    /// whether the route counts against the global limit (interactions
    /// do not).
    Discord { major: String, global: bool },
    /// IETF partitions (`pk`).
    Partitions,
    /// Stripe's objects: the scope of the object the request names (see
    /// [`vendor::stripe::stripe_object`]).
    Stripe(String),
}

/// What decides a request's limits: kept by its task while a scope may
/// apply (`None` there: the origin's limit alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    rule: Rule,
    /// The key learned scopes are kept under: method and path with ids
    /// collapsed (as the vendor's best clients key them).
    route: String,
}

/// An origin, as scopes are learned of it.
#[derive(Clone, Copy)]
pub(crate) struct Origin<'a> {
    pub(crate) map: &'a ScopeMap,
    pub(crate) origin: &'a str,
    /// Which vendors' scopes its answers are read for.
    pub(crate) scoping: Scoping,
    /// How many scopes it may have.
    pub(crate) max: usize,
}

/// What an answer says that scopes are read from.
#[derive(Clone, Copy)]
pub(crate) struct Answer<'a> {
    /// The path of the URL that answered.
    pub(crate) path: &'a str,
    pub(crate) status: StatusCode,
    pub(crate) headers: &'a HeaderMap,
}

/// Which limits an answer speaks for: `None` is the origin's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Answered {
    /// The scope its rate-limit statement (remaining, reset) is of.
    pub(crate) statement: Option<String>,
    /// The scope a pushback in it holds.
    pub(crate) pushback: Option<String>,
}

impl Route {
    /// The route of a request to `origin`, or `None` when no scope can
    /// apply to it: none declared, none its headers' presets read, or no
    /// scopes allowed. IETF partitions are learned from answers; until one
    /// was, requests have no route (the success path of a client whose
    /// servers name none builds nothing).
    pub(crate) fn of(
        policy: &Policy,
        map: &ScopeMap,
        origin: &str,
        method: &Method,
        path: &str,
        declared: Option<&crate::Scope>,
        key: Option<&str>,
    ) -> Option<Box<Route>> {
        if policy.scopes.max == 0 || !policy.origin_gate {
            return None;
        }
        if let Some(scope) = declared {
            return Some(Box::new(Route {
                rule: Rule::Declared(scope.as_str().to_owned()),
                route: String::new(),
            }));
        }
        if let Some(scope) = policy.scopes.rule_for(origin, method, path) {
            return Some(Box::new(Route {
                rule: Rule::Declared(scope.to_owned()),
                route: String::new(),
            }));
        }
        let scoping = policy.rate_limit_headers.scoping();
        if scoping.github {
            return Some(Box::new(Route {
                rule: Rule::GitHub(vendor::github_resource_of(method, path)),
                route: collapsed(Some(method), path),
            }));
        }
        if scoping.discord {
            let d = vendor::discord_route(method, path);
            return Some(Box::new(Route {
                rule: Rule::Discord {
                    global: d.under_global_limit(),
                    major: d.major,
                },
                route: d.route,
            }));
        }
        if scoping.stripe {
            let object = vendor::stripe::stripe_object(path, key);
            return Some(Box::new(Route {
                route: object.clone(),
                rule: Rule::Stripe(object),
            }));
        }
        if scoping.ietf_partitions && map.learned_any() {
            return Some(Box::new(Route::partitions(path)));
        }
        None
    }

    /// The route of a path under IETF partitions.
    fn partitions(path: &str) -> Route {
        Route {
            rule: Rule::Partitions,
            route: collapsed(None, path),
        }
    }

    /// The scope the request falls under now (`None`: its origin's limit
    /// alone), at most `max` per origin.
    pub(crate) fn scope(&self, map: &ScopeMap, origin: &str, max: usize) -> Option<String> {
        let scope = match &self.rule {
            Rule::Declared(scope) => scope.clone(),
            Rule::GitHub(documented) => map
                .learned(origin, &self.route)
                .unwrap_or_else(|| (*documented).to_owned()),
            Rule::Discord { major, .. } => match map.learned(origin, &self.route) {
                Some(bucket) => bucket_scope(&bucket, major),
                // As discord.js keys an unknown bucket: the route, with
                // its major parameter.
                None => bucket_scope(&format!("route:{}", self.route), major),
            },
            // A route not mapped yet, at an origin known to partition:
            // the route itself, one request at a time (the first contact
            // of its limit) until its answer names its partition.
            Rule::Partitions => match map.learned(origin, &self.route) {
                Some(pk) => pk,
                None if map.knows(origin) => format!("route:{}", self.route),
                None => return None,
            },
            // Its object's limit once an answer said the object was busy;
            // until then the origin's alone.
            Rule::Stripe(_) => map.learned(origin, &self.route)?,
        };
        map.admits(origin, &scope, max).then_some(scope)
    }

    /// Which limits an answer speaks for, given the scope its request fell
    /// under (`scope`), and what the origin's map learns from it. `route`
    /// is `None` when the request had none: an answer naming an IETF
    /// partition then gives its path one.
    pub(crate) fn answered(
        route: Option<&Route>,
        scope: Option<&str>,
        at: &Origin<'_>,
        answer: &Answer<'_>,
    ) -> Answered {
        let Origin {
            map,
            origin,
            scoping,
            max,
        } = *at;
        let Answer {
            path,
            status,
            headers,
        } = *answer;
        let mine = || scope.map(str::to_owned);
        // A vendor's scoped limits answer `429` (GitHub's primary limit
        // also `403`); any other pushback (a `503`: an outage, a proxy)
        // is the origin's.
        let scoped_status = matches!(status.as_u16(), 429 | 403) || status.is_success();
        let Some(route) = route else {
            if scoping.ietf_partitions
                && max > 0
                && scoped_status
                && let Some(pk) = vendor::ietf_partition(headers)
            {
                return Route::partitions(path).partition(map, origin, &pk, max);
            }
            return Answered::default();
        };
        match &route.rule {
            Rule::Declared(_) => Answered {
                statement: mine(),
                pushback: mine(),
            },
            Rule::GitHub(documented) => {
                let named = vendor::github_answer_resource(headers).map(super::key::clean);
                // An answer naming no resource is no GitHub statement: the
                // origin's.
                let resource = match named {
                    Some(named) => {
                        if named == *documented {
                            map.forget(origin, &route.route);
                        } else if !map.learn(origin, &route.route, &named, max) {
                            return Answered::default();
                        }
                        map.admits(origin, &named, max).then_some(named)
                    }
                    None => None,
                };
                // The secondary limit names a time (`retry-after`) and holds
                // the origin; the primary one (remaining 0, a reset) its
                // resource.
                let secondary = headers.contains_key(http::header::RETRY_AFTER);
                Answered {
                    pushback: if secondary || !scoped_status {
                        None
                    } else {
                        resource.clone()
                    },
                    statement: resource,
                }
            }
            Rule::Discord { major, .. } => {
                let answer = vendor::discord_answer(headers);
                let bucket = match &answer.bucket {
                    Some(bucket) => {
                        if !map.learn(origin, &route.route, bucket, max) {
                            return Answered::default();
                        }
                        let scope = bucket_scope(bucket, major);
                        map.admits(origin, &scope, max).then_some(scope)
                    }
                    // No bucket named: no Discord statement (a proxy's
                    // answer, an outage): the origin's.
                    None => None,
                };
                let global = matches!(answer.scope, Some(DiscordScope::Global));
                Answered {
                    pushback: if global || !scoped_status {
                        None
                    } else {
                        bucket.clone()
                    },
                    statement: bucket,
                }
            }
            Rule::Partitions => match vendor::ietf_partition(headers) {
                Some(pk) if scoped_status => route.partition(map, origin, &pk, max),
                _ => Answered::default(),
            },
            // Stripe's word on this one request (a `lock_timeout`) is its
            // object's; its rate limiter says nothing of the kind.
            Rule::Stripe(object) => {
                // `true` on an error (a pushback then), or `false` on a
                // pushback status; a `false` on a declined card is no
                // pushback, and teaches nothing.
                let error = status.is_client_error() || status.is_server_error();
                let speaks = match crate::ratelimit::should_retry(headers) {
                    Some(true) => error,
                    Some(false) => matches!(status.as_u16(), 429 | 503),
                    None => false,
                };
                if !speaks {
                    return Answered::default();
                }
                if !map.learn(origin, &route.route, object, max) {
                    return Answered::default();
                }
                Answered {
                    statement: None,
                    pushback: map.admits(origin, object, max).then(|| object.clone()),
                }
            }
        }
    }

    /// Whether the request counts against its API's documented global
    /// limit (Discord's interactions do not).
    pub(crate) fn under_global_limit(&self) -> bool {
        !matches!(self.rule, Rule::Discord { global: false, .. })
    }

    /// An answer on this route named partition `pk`.
    fn partition(&self, map: &ScopeMap, origin: &str, pk: &str, max: usize) -> Answered {
        let pk = super::key::clean(pk);
        if !map.learn(origin, &self.route, &pk, max) {
            return Answered::default();
        }
        Answered {
            statement: Some(pk.clone()),
            pushback: Some(pk),
        }
    }
}

/// A Discord bucket's scope: its hash with the route's major parameter.
fn bucket_scope(bucket: &str, major: &str) -> String {
    if major.is_empty() {
        bucket.to_owned()
    } else {
        format!("{bucket}:{major}")
    }
}

/// The longest route kept, in bytes.
const MAX_ROUTE_LEN: usize = 256;

/// `method` (if given) and `path` with the segments that are ids (all
/// digits, or long hex/uuid-like) written `:id`, at most
/// [`MAX_ROUTE_LEN`] bytes.
fn collapsed(method: Option<&Method>, path: &str) -> String {
    let mut route = String::with_capacity(path.len().min(MAX_ROUTE_LEN) + 8);
    if let Some(method) = method {
        route.push_str(method.as_str());
        route.push(' ');
    }
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        if route.len() >= MAX_ROUTE_LEN {
            break;
        }
        route.push('/');
        let id = segment.bytes().all(|b| b.is_ascii_digit())
            || (segment.len() >= 16 && segment.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
        if id {
            route.push_str(":id");
        } else {
            route.push_str(segment);
        }
    }
    if route.len() > MAX_ROUTE_LEN {
        let mut cut = MAX_ROUTE_LEN;
        while !route.is_char_boundary(cut) {
            cut -= 1;
        }
        route.truncate(cut);
    }
    route
}
