//! Discord: routes, majors and answers, as its docs and clients show them.

use http::Method;

use super::super::*;
use super::headers;

#[test]
fn discord_routes_share_a_key_per_route_and_split_by_top_level_resource() {
    // The docs' example: /channels/1234 and /channels/9876 are counted
    // apart, by the same route.
    let a = discord_route(&Method::GET, "/channels/1234");
    let b = discord_route(&Method::GET, "/channels/9876");
    assert_eq!(a.route, "GET /channels/:id");
    assert_eq!(a.route, b.route);
    assert_eq!(
        (a.major.as_str(), b.major.as_str()),
        ("channels/1234", "channels/9876")
    );

    let guild = discord_route(&Method::GET, "/api/v10/guilds/613425648685547541/channels");
    assert_eq!(guild.route, "GET /guilds/:id/channels");
    assert_eq!(guild.major, "guilds/613425648685547541");
    // Emoji routes are limited per guild: the guild is their major.
    let emoji = discord_route(
        &Method::PATCH,
        "/guilds/613425648685547541/emojis/41771983429993937",
    );
    assert_eq!(emoji.route, "PATCH /guilds/:id/emojis/:id");
    assert_eq!(emoji.major, guild.major);

    // Every message of a channel shares the route and the major; the
    // method is part of the route.
    let m1 = discord_route(&Method::GET, "/channels/41771983423143937/messages/1111");
    let m2 = discord_route(
        &Method::GET,
        "/channels/41771983423143937/messages/2222?x=1",
    );
    let del = discord_route(&Method::DELETE, "/channels/41771983423143937/messages/1111");
    assert_eq!(m1, m2);
    assert_eq!(m1.route, "GET /channels/:id/messages/:id");
    assert_eq!(del.route, "DELETE /channels/:id/messages/:id");
    assert_eq!(del.major, m1.major);

    // The API prefix, with or without a version, and empty segments do
    // not change the key.
    for path in [
        "/channels/1234",
        "/api/channels/1234",
        "/api/v9/channels/1234/",
        "//channels//1234",
    ] {
        assert_eq!(discord_route(&Method::GET, path), a, "{path}");
    }
    let me = discord_route(&Method::GET, "/users/@me");
    assert_eq!(
        (me.route.as_str(), me.major.as_str()),
        ("GET /users/@me", "")
    );
    assert_eq!(discord_route(&Method::GET, "").route, "GET /");
}

#[test]
fn discord_reactions_share_one_bucket_whatever_the_emoji_and_user() {
    let base = "/channels/41771983423143937/messages/41771983423143938/reactions";
    let routes: Vec<_> = [
        format!("{base}/%F0%9F%94%A5/@me"),
        format!("{base}/custom_emoji:41771983429993000/@me"),
        format!("{base}/%F0%9F%94%A5/80351110224678912"),
    ]
    .iter()
    .map(|path| discord_route(&Method::PUT, path))
    .collect();
    for route in &routes {
        assert_eq!(
            route.route,
            "PUT /channels/:id/messages/:id/reactions/:reaction"
        );
        assert_eq!(route.major, "channels/41771983423143937");
    }
    // Deleting all of them has a route of its own.
    let all = discord_route(&Method::DELETE, base);
    assert_eq!(all.route, "DELETE /channels/:id/messages/:id/reactions");
}

#[test]
fn a_discord_webhook_token_is_part_of_its_major_but_never_kept() {
    let token = "Ku8T9Fz6sEcrEt-tOkEn_0123456789";
    let other = "another-secret-token";
    let by_token = discord_route(
        &Method::POST,
        &format!("/webhooks/223704706495545344/{token}?wait=true"),
    );
    let other_token = discord_route(
        &Method::POST,
        &format!("/webhooks/223704706495545344/{other}"),
    );
    let by_bot = discord_route(&Method::GET, "/webhooks/223704706495545344");
    assert_eq!(by_token.route, "POST /webhooks/:id/:token");
    assert_eq!(other_token.route, by_token.route);
    assert!(
        by_token.major.starts_with("webhooks/223704706495545344/"),
        "{}",
        by_token.major
    );
    assert_ne!(by_token.major, other_token.major);
    assert_eq!(by_bot.major, "webhooks/223704706495545344");
    for route in [&by_token, &other_token] {
        assert!(!route.major.contains(token) && !route.route.contains(token));
        assert!(!route.major.contains(other) && !route.route.contains(other));
        assert!(route.major.len() <= MAX_SCOPE_LEN);
    }
    let message = discord_route(
        &Method::PATCH,
        &format!("/webhooks/223704706495545344/{token}/messages/@original"),
    );
    assert_eq!(
        message.route,
        "PATCH /webhooks/:id/:token/messages/@original"
    );
    assert_eq!(message.major, by_token.major);
    // A token after an id that is no snowflake is not kept either.
    let odd = discord_route(&Method::POST, &format!("/api/webhooks/x/{token}"));
    assert_eq!(odd.route, "POST /webhooks/x/:token");
    assert_eq!(odd.major, "");
}

#[test]
fn interaction_endpoints_are_outside_the_global_limit() {
    let callback = discord_route(
        &Method::POST,
        "/interactions/41771983423143937/aW50ZXJhY3Rpb246dG9rZW4/callback",
    );
    assert_eq!(callback.route, "POST /interactions/:id/:token/callback");
    assert_eq!(callback.major, "");
    assert!(!callback.under_global_limit());
    let followup = discord_route(&Method::POST, "/webhooks/41771983423143937/aW50ZXJhY3Rpb24");
    assert!(!followup.under_global_limit());
    for bound in [
        discord_route(&Method::GET, "/webhooks/41771983423143937"),
        discord_route(&Method::POST, "/channels/1/messages"),
        discord_route(&Method::GET, "/interactions/1/t/callback/x"),
    ] {
        assert!(bound.under_global_limit(), "{}", bound.route);
    }
}

#[test]
fn a_long_discord_route_is_cut_and_keeps_apart_from_another() {
    let long = format!("/channels/1/{}", "segment/".repeat(60));
    let a = discord_route(&Method::GET, &format!("{long}a"));
    let b = discord_route(&Method::GET, &format!("{long}b"));
    assert!(a.route.len() <= MAX_ROUTE_LEN && b.route.len() <= MAX_ROUTE_LEN);
    assert!(a.route.starts_with("GET /channels/:id/segment/segment/"));
    assert_ne!(a.route, b.route);
    let (head, tail) = a.route.rsplit_once('~').expect("a digest tail");
    assert_eq!(tail.len(), 16);
    assert!(tail.bytes().all(|c| c.is_ascii_hexdigit()));
    assert!(head.len() < MAX_ROUTE_LEN - 16);
    // Multi-byte characters are cut at a boundary.
    let wide = discord_route(&Method::GET, &format!("/{}", "é".repeat(300)));
    assert!(wide.route.len() <= MAX_ROUTE_LEN);
}

#[test]
fn discord_answers_name_their_bucket_and_scope_as_the_docs_show() {
    // The docs' header example (a success): a bucket, no scope.
    let ok = headers(&[
        ("x-ratelimit-limit", "5"),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "1470173023"),
        ("x-ratelimit-reset-after", "1"),
        ("x-ratelimit-bucket", "abcd1234"),
    ]);
    let answer = discord_answer(&ok);
    assert_eq!(answer.bucket.as_deref(), Some("abcd1234"));
    assert_eq!(answer.scope, None);
    // The docs' three 429s.
    let user = headers(&[
        ("retry-after", "65"),
        ("x-ratelimit-bucket", "abcd1234"),
        ("x-ratelimit-scope", "user"),
    ]);
    assert_eq!(
        discord_answer(&user),
        DiscordAnswer {
            bucket: Some("abcd1234".to_owned()),
            scope: Some(DiscordScope::User)
        }
    );
    let shared = headers(&[
        ("x-ratelimit-bucket", "abcd1234"),
        ("x-ratelimit-scope", "shared"),
    ]);
    assert_eq!(discord_answer(&shared).scope, Some(DiscordScope::Shared));
    let global = headers(&[
        ("x-ratelimit-global", "true"),
        ("x-ratelimit-scope", "global"),
    ]);
    assert_eq!(
        discord_answer(&global),
        DiscordAnswer {
            bucket: None,
            scope: Some(DiscordScope::Global)
        }
    );
    // `X-RateLimit-Global: true` alone, or against another scope, is global.
    for pairs in [
        &[("x-ratelimit-global", "True")][..],
        &[
            ("x-ratelimit-global", "true"),
            ("x-ratelimit-scope", "user"),
        ][..],
    ] {
        assert_eq!(
            discord_answer(&headers(pairs)).scope,
            Some(DiscordScope::Global)
        );
    }
    let not_global = headers(&[
        ("x-ratelimit-global", "false"),
        ("x-ratelimit-scope", " User "),
    ]);
    assert_eq!(discord_answer(&not_global).scope, Some(DiscordScope::User));
    for unknown in ["", "guild", "user, shared"] {
        let map = headers(&[("x-ratelimit-scope", unknown)]);
        assert_eq!(discord_answer(&map).scope, None, "{unknown:?}");
    }
}

#[test]
fn a_hostile_discord_bucket_is_cleaned_or_dropped() {
    let hostile = format!("a#b c{}", "x".repeat(200));
    let answer = discord_answer(&headers(&[("x-ratelimit-bucket", &hostile)]));
    let bucket = answer.bucket.expect("a bucket");
    assert!(bucket.len() <= MAX_SCOPE_LEN);
    assert!(bucket.starts_with("a_b_cx"), "{bucket}");
    for pairs in [
        &[("x-ratelimit-bucket", " ")][..],
        &[("x-ratelimit-bucket", "a"), ("x-ratelimit-bucket", "b")][..],
    ] {
        assert_eq!(discord_answer(&headers(pairs)).bucket, None);
    }
}
