//! The set of limits a request falls under, and which an answer speaks
//! for: each vendor's rule with fixed headers, no I/O.

use http::{HeaderMap, HeaderValue, Method, StatusCode};

use super::{Answer, Answered, Origin, Route, Scope, ScopeMap};
use crate::{Policy, RateLimitHeaders};

const O: &str = "https://api.example.com:443";

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_static(v));
    }
    h
}

fn route(policy: &Policy, map: &ScopeMap, method: Method, path: &str) -> Option<Box<Route>> {
    Route::of(policy, map, O, &method, path, None, None)
}

fn scope_of(policy: &Policy, map: &ScopeMap, method: Method, path: &str) -> Option<String> {
    route(policy, map, method, path)?.scope(map, O, policy.scopes.max)
}

fn answered(
    policy: &Policy,
    map: &ScopeMap,
    route: Option<&Route>,
    path: &str,
    status: u16,
    h: &HeaderMap,
) -> Answered {
    let scope = route.and_then(|r| r.scope(map, O, policy.scopes.max));
    let at = Origin {
        map,
        origin: O,
        scoping: policy.rate_limit_headers.scoping(),
        max: policy.scopes.max,
    };
    let answer = Answer {
        path,
        status: StatusCode::from_u16(status).expect("status"),
        headers: h,
    };
    Route::answered(route, scope.as_deref(), &at, &answer)
}

fn both(scope: Option<&str>) -> Answered {
    Answered {
        statement: scope.map(str::to_owned),
        pushback: scope.map(str::to_owned),
    }
}

#[test]
fn without_scopes_a_request_falls_under_its_origin_alone() {
    let map = ScopeMap::default();
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::openai());
    assert_eq!(route(&policy, &map, Method::GET, "/v1/x"), None);
    let none = answered(
        &policy,
        &map,
        None,
        "/v1/x",
        429,
        &headers(&[("retry-after", "1")]),
    );
    assert_eq!(none, Answered::default());
    // No scopes allowed: not even a declared one.
    let off = Policy::default().max_scopes(0);
    let declared = Scope::new("t1");
    assert_eq!(
        Route::of(&off, &map, O, &Method::GET, "/", Some(&declared), None),
        None
    );
}

#[test]
fn a_declared_scope_wins_and_its_answers_are_its_own() {
    let map = ScopeMap::default();
    let policy = Policy::default()
        .rate_limit_headers(RateLimitHeaders::github())
        .scope_rule(O, Some(Method::POST), "/v1/charges", "charges");
    let declared = Scope::new("tenant-7");
    let r = Route::of(
        &policy,
        &map,
        O,
        &Method::GET,
        "/search/x",
        Some(&declared),
        None,
    )
    .expect("a route");
    assert_eq!(r.scope(&map, O, 8).as_deref(), Some("tenant-7"));
    let a = answered(
        &policy,
        &map,
        Some(&r),
        "/search/x",
        429,
        &headers(&[("retry-after", "1")]),
    );
    assert_eq!(a, both(Some("tenant-7")));
    assert_eq!(
        scope_of(&policy, &map, Method::POST, "/v1/charges/ch_1").as_deref(),
        Some("charges")
    );
}

#[test]
fn github_maps_by_path_until_an_answer_names_the_resource() {
    let map = ScopeMap::default();
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::github());
    assert_eq!(
        scope_of(&policy, &map, Method::GET, "/repos/o/r").as_deref(),
        Some("core")
    );
    assert_eq!(
        scope_of(&policy, &map, Method::GET, "/search/issues").as_deref(),
        Some("search")
    );
    // An answer says this path counts against another resource: learned.
    let r = route(&policy, &map, Method::GET, "/meta/odd").expect("a route");
    let named = headers(&[("x-ratelimit-resource", "integration_manifest")]);
    let a = answered(&policy, &map, Some(&r), "/meta/odd", 200, &named);
    assert_eq!(a, both(Some("integration_manifest")));
    assert_eq!(
        scope_of(&policy, &map, Method::GET, "/meta/odd").as_deref(),
        Some("integration_manifest")
    );
}

#[test]
fn github_secondary_limits_and_outages_hold_the_origin() {
    let map = ScopeMap::default();
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::github());
    let r = route(&policy, &map, Method::GET, "/repos/o/r").expect("a route");
    let primary = headers(&[
        ("x-ratelimit-resource", "core"),
        ("x-ratelimit-remaining", "0"),
    ]);
    assert_eq!(
        answered(&policy, &map, Some(&r), "/repos/o/r", 403, &primary),
        both(Some("core"))
    );
    let secondary = headers(&[("x-ratelimit-resource", "core"), ("retry-after", "3")]);
    let a = answered(&policy, &map, Some(&r), "/repos/o/r", 429, &secondary);
    assert_eq!((a.statement.as_deref(), a.pushback), (Some("core"), None));
    let outage = headers(&[("x-ratelimit-resource", "core")]);
    let a = answered(&policy, &map, Some(&r), "/repos/o/r", 503, &outage);
    assert_eq!(a.pushback, None, "a 503 is the origin's");
    // No resource named: no GitHub statement.
    let bare = answered(
        &policy,
        &map,
        Some(&r),
        "/repos/o/r",
        429,
        &HeaderMap::new(),
    );
    assert_eq!(bare, Answered::default());
}

#[test]
fn discord_learns_a_routes_bucket_with_its_major_parameter() {
    let map = ScopeMap::default();
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::discord());
    let path = "/api/v10/channels/111111111111111111/messages";
    let before = scope_of(&policy, &map, Method::POST, path).expect("a route's scope");
    assert!(before.starts_with("route:"), "{before}");
    let r = route(&policy, &map, Method::POST, path).expect("a route");
    let bucket = headers(&[
        ("x-ratelimit-bucket", "abcd1234"),
        ("x-ratelimit-remaining", "4"),
    ]);
    let a = answered(&policy, &map, Some(&r), path, 200, &bucket);
    let scope = a.statement.clone().expect("the bucket's scope");
    assert!(
        scope.starts_with("abcd1234") && scope.contains("111111111111111111"),
        "{scope}"
    );
    assert_eq!(
        scope_of(&policy, &map, Method::POST, path),
        Some(scope.clone())
    );
    // The same route in another channel: the same bucket, another limit.
    let other = "/api/v10/channels/222222222222222222/messages";
    let theirs = scope_of(&policy, &map, Method::POST, other).expect("a scope");
    assert!(
        theirs.starts_with("abcd1234") && theirs != scope,
        "{theirs}"
    );
    // A global 429 holds the origin; the bucket's own holds the bucket.
    let global = headers(&[
        ("x-ratelimit-bucket", "abcd1234"),
        ("x-ratelimit-global", "true"),
        ("x-ratelimit-scope", "global"),
        ("retry-after", "1"),
    ]);
    assert_eq!(
        answered(&policy, &map, Some(&r), path, 429, &global).pushback,
        None
    );
    let own = headers(&[
        ("x-ratelimit-bucket", "abcd1234"),
        ("x-ratelimit-scope", "user"),
        ("retry-after", "1"),
    ]);
    assert_eq!(
        answered(&policy, &map, Some(&r), path, 429, &own),
        both(Some(&scope))
    );
}

#[test]
fn ietf_partitions_are_learned_from_the_answers_that_name_them() {
    let map = ScopeMap::default();
    let policy = Policy::default();
    assert_eq!(
        route(&policy, &map, Method::GET, "/a/1"),
        None,
        "nothing learned yet"
    );
    let named = headers(&[("ratelimit", "\"p\";r=3;t=1;pk=:cGFydC1h:")]);
    let a = answered(&policy, &map, None, "/a/1", 200, &named);
    let pk = a.statement.clone().expect("a partition");
    assert_eq!(a, both(Some(&pk)));
    // The path (ids collapsed) now maps to the partition; another does not.
    assert_eq!(scope_of(&policy, &map, Method::GET, "/a/2"), Some(pk));
    // Another path of an origin known to partition: its own route until
    // its answer names its partition.
    let other = scope_of(&policy, &map, Method::GET, "/b/1").expect("a route's scope");
    assert!(other.starts_with("route:"), "{other}");
}

#[test]
fn scopes_past_the_cap_fall_to_the_origin() {
    let map = ScopeMap::default();
    let policy = Policy::default()
        .rate_limit_headers(RateLimitHeaders::discord())
        .max_scopes(2);
    let mut kept = 0;
    for channel in 0..6u64 {
        let path = format!("/channels/{}/messages", 100_000_000_000_000_000 + channel);
        if scope_of(&policy, &map, Method::POST, &path).is_some() {
            kept += 1;
        }
    }
    assert_eq!(kept, 2, "at most two scopes for the origin");
}

#[test]
fn discords_global_limit_applies_once_the_origin_answers_as_discord() {
    let map = ScopeMap::default();
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::discord());
    let scope_key = super::key::limit_key(O, Some("abc"));
    assert_eq!(super::pacing_config(&policy, &map, O, true).declared, None);
    let path = "/channels/111111111111111111/messages";
    let r = route(&policy, &map, Method::POST, path).expect("a route");
    let bucket = headers(&[
        ("x-ratelimit-bucket", "abc"),
        ("x-ratelimit-remaining", "4"),
    ]);
    answered(&policy, &map, Some(&r), path, 200, &bucket);
    assert_eq!(
        super::pacing_config(&policy, &map, O, true).declared,
        Some(super::DISCORD_GLOBAL)
    );
    assert_eq!(
        super::pacing_config(&policy, &map, &scope_key, true).declared,
        None
    );
    // A quota the caller declares wins; other presets know no such limit.
    let declared = policy.clone().quota(O, crate::Quota::per_second(5));
    assert_eq!(
        super::pacing_config(&declared, &map, O, true).declared,
        Some(crate::Quota::per_second(5))
    );
    assert_eq!(super::pacing_config(&policy, &map, O, false).declared, None);
    let github = Policy::default().rate_limit_headers(RateLimitHeaders::github());
    assert_eq!(super::pacing_config(&github, &map, O, true).declared, None);
}

#[test]
fn stripe_a_lock_timeout_holds_its_object_and_the_rate_limiter_the_origin() {
    let map = ScopeMap::default();
    let policy = Policy::stripe();
    let path = "/v1/customers/cus_001";
    let object = "object:customers/cus_001";
    let r = route(&policy, &map, Method::POST, path).expect("a route");
    // Before an answer names the object busy: the origin's limit alone.
    assert_eq!(r.scope(&map, O, policy.scopes.max), None);
    // The rate limiter's 429 (no Stripe-Should-Retry): the origin's.
    let limiter = answered(&policy, &map, Some(&r), path, 429, &headers(&[]));
    assert_eq!(limiter, Answered::default());
    // A lock timeout: its object's.
    let lock = headers(&[("stripe-should-retry", "true")]);
    let held = answered(&policy, &map, Some(&r), path, 429, &lock);
    assert_eq!(held.pushback.as_deref(), Some(object));
    assert_eq!(held.statement, None);
    // From then on the object's requests fall under its limit...
    assert_eq!(
        scope_of(&policy, &map, Method::POST, "/v1/customers/cus_001/sources").as_deref(),
        Some(object)
    );
    // ...and its successes speak for the origin.
    assert_eq!(
        answered(&policy, &map, Some(&r), path, 200, &headers(&[])),
        Answered::default()
    );
    // A declined card's `false` is no pushback: it teaches nothing.
    let declined = Route::of(
        &policy,
        &map,
        O,
        &Method::POST,
        "/v1/charges/ch_9",
        None,
        None,
    )
    .expect("a route");
    let no = headers(&[("stripe-should-retry", "false")]);
    let answer = answered(&policy, &map, Some(&declined), "/v1/charges/ch_9", 402, &no);
    assert_eq!(answer, Answered::default());
    assert_eq!(
        scope_of(&policy, &map, Method::POST, "/v1/charges/ch_9"),
        None
    );
    // Another object's requests do not.
    assert_eq!(
        scope_of(&policy, &map, Method::POST, "/v1/customers/cus_002"),
        None
    );
    // A create names no object: its key does (never shown as such).
    let create = Route::of(
        &policy,
        &map,
        O,
        &Method::POST,
        "/v1/customers",
        None,
        Some("order-42"),
    )
    .expect("a route");
    let held = answered(&policy, &map, Some(&create), "/v1/customers", 409, &lock);
    let scope = held.pushback.expect("its key's scope");
    assert!(scope.starts_with("object:key:") && !scope.contains("order-42"));
}

#[test]
fn a_stated_leaky_bucket_paces_its_origin_once_it_answered_with_it() {
    let map = ScopeMap::default();
    let policy = Policy::shopify();
    assert_eq!(super::pacing_config(&policy, &map, O, true).declared, None);
    map.bucket_stated(O, 0, 40);
    let bucket = crate::Quota::new(39, std::time::Duration::from_millis(19_500)).refilled();
    assert_eq!(
        super::pacing_config(&policy, &map, O, true).declared,
        Some(bucket)
    );
    // Not a scope's limit, not another origin's.
    let scope_key = super::key::limit_key(O, Some("abc"));
    assert_eq!(
        super::pacing_config(&policy, &map, &scope_key, true).declared,
        None
    );
    assert_eq!(
        super::pacing_config(&policy, &map, "https://other.example:443", true).declared,
        None
    );
    // A quota the caller declares wins; a policy without the preset
    // reads no bucket.
    let declared = policy.clone().quota(O, crate::Quota::per_second(5));
    assert_eq!(
        super::pacing_config(&declared, &map, O, true).declared,
        Some(crate::Quota::per_second(5))
    );
    assert_eq!(
        super::pacing_config(&Policy::default(), &map, O, true).declared,
        None
    );
}
