// TEMPORARY STUB (not committed): replaced by the vendor helper's file.
#![allow(dead_code, unused_variables)]
use http::{HeaderMap, Method};
pub(crate) fn github_resource_of(method: &Method, path: &str) -> &'static str {
    if path.starts_with("/search/code") {
        "code_search"
    } else if path.starts_with("/search/") {
        "search"
    } else if path == "/graphql" {
        "graphql"
    } else {
        "core"
    }
}
pub(crate) fn github_answer_resource(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-ratelimit-resource")?.to_str().ok()
}
pub(crate) struct DiscordRoute {
    pub(crate) route: String,
    pub(crate) major: String,
}
pub(crate) fn discord_route(method: &Method, path: &str) -> DiscordRoute {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut major = String::new();
    let mut out = format!("{method} ");
    for (i, s) in segs.iter().enumerate() {
        let digits = s.bytes().all(|b| b.is_ascii_digit());
        if digits
            && i > 0
            && major.is_empty()
            && matches!(segs[i - 1], "channels" | "guilds" | "webhooks")
        {
            major = s.to_string();
            out.push_str("/:id");
        } else if digits {
            out.push_str("/:id")
        } else {
            out.push('/');
            out.push_str(s)
        }
    }
    DiscordRoute { route: out, major }
}
pub(crate) enum DiscordScope {
    User,
    Global,
    Shared,
}
pub(crate) struct DiscordAnswer {
    pub(crate) bucket: Option<String>,
    pub(crate) scope: Option<DiscordScope>,
}
pub(crate) fn discord_answer(headers: &HeaderMap) -> DiscordAnswer {
    let bucket = headers
        .get("x-ratelimit-bucket")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let global = headers
        .get("x-ratelimit-global")
        .is_some_and(|v| v == "true")
        || headers
            .get("x-ratelimit-scope")
            .is_some_and(|v| v == "global");
    let scope = if global {
        Some(DiscordScope::Global)
    } else {
        headers.get("x-ratelimit-scope").map(|v| {
            if v == "shared" {
                DiscordScope::Shared
            } else {
                DiscordScope::User
            }
        })
    };
    DiscordAnswer { bucket, scope }
}
pub(crate) fn ietf_partition(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("ratelimit")?.to_str().ok()?;
    let i = v.find("pk=:")?;
    let rest = &v[i + 4..];
    Some(rest[..rest.find(':')?].to_owned())
}
