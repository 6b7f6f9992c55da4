//! The scopes vendors document: which limit of an origin a request counts
//! against before an answer says, and which one an answer names.
//!
//! Why vendor rules? One origin runs several limits, and only the vendor
//! knows how its traffic splits: GitHub counts a request against a named
//! resource (`core`, `search`, `graphql`...), Discord against a bucket of
//! a route and its top-level resource, an IETF server against a partition
//! key. These functions read that split from a request's method and path
//! and from an answer's headers, as each vendor documents it, and nothing
//! more: a request the documents do not place counts where the vendor
//! says everything else does (GitHub's `core`), or by its route alone
//! until an answer names its bucket (Discord).
//!
//! All are pure, never panic, and bound what they return: a Discord route
//! is at most [`MAX_ROUTE_LEN`] bytes, a scope name at most
//! [`MAX_SCOPE_LEN`] bytes. Where a text is too long it keeps its head and
//! ends with `~` and a digest of the whole, so two long texts stay apart.

// Nothing calls these yet: the scope plumbing that does is being written.

use http::header::HeaderName;
use http::{HeaderMap, Method};
use sfv::{FieldType, List, ListEntry, Parser};

use super::MAX_SCOPE_LEN;
use super::key::clean;
use crate::ratelimit::ietf::{MAX_POLICIES, combined, policy};
use crate::ratelimit::single;

/// The longest Discord route kept, in bytes (method and path).
pub(crate) const MAX_ROUTE_LEN: usize = 256;

const X_RATELIMIT_RESOURCE: HeaderName = HeaderName::from_static("x-ratelimit-resource");
const X_RATELIMIT_BUCKET: HeaderName = HeaderName::from_static("x-ratelimit-bucket");
const X_RATELIMIT_SCOPE: HeaderName = HeaderName::from_static("x-ratelimit-scope");
const X_RATELIMIT_GLOBAL: HeaderName = HeaderName::from_static("x-ratelimit-global");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// GitHub: the resource a request counts against before an answer says.
///
/// From GitHub's "REST API endpoints for rate limits" (the resources of
/// `GET /rate_limit`) and the changelogs behind them:
///
/// - `/search/code` is `code_search`; any other `/search/...` is `search`;
/// - `/graphql` is `graphql`;
/// - `POST /app-manifests/{code}/conversions` is `integration_manifest`;
/// - `POST /repos/{owner}/{repo}/dependency-graph/snapshots` is
///   `dependency_snapshots`; `/repos/{owner}/{repo}/dependency-graph/sbom`
///   and below is `dependency_sbom`;
/// - `/orgs/{org}/audit-log` and `/enterprises/{enterprise}/audit-log` are
///   `audit_log` (the audit log's own 1,750-an-hour limit);
/// - `POST /actions/runner-registration` (what a runner's `config.sh`
///   calls) is `actions_runner_registration`; the `registration-token`
///   endpoints count against `core`, as GitHub's runner maintainers say;
/// - everything else is `core`, SARIF uploads included: GitHub retired
///   `code_scanning_upload` as a resource of its own (it always shared
///   `core`'s pool), and `source_import` counts nothing any more.
///
/// Resources GitHub lists without saying which paths count against them
/// (`scim`, `code_scanning_autofix`, `audit_log_streaming`...) are left
/// to the answer's `x-ratelimit-resource`. The query is ignored, and so is
/// GitHub Enterprise Server's `/api/v3` prefix (its GraphQL is at
/// `/api/graphql`).
pub(crate) fn github_resource_of(method: &Method, path: &str) -> &'static str {
    let mut first = [""; 6];
    let mut len = 0;
    for segment in segments(path) {
        match first.get_mut(len) {
            Some(slot) => *slot = segment,
            // Longer than any path named above.
            None => return "core",
        }
        len += 1;
    }
    let post = method == Method::POST;
    match first.get(..len).unwrap_or_default() {
        ["search", "code"] => "code_search",
        ["search", _, ..] => "search",
        ["graphql"] => "graphql",
        ["app-manifests", _, "conversions"] if post => "integration_manifest",
        ["repos", _, _, "dependency-graph", "snapshots"] if post => "dependency_snapshots",
        ["repos", _, _, "dependency-graph", "sbom", ..] => "dependency_sbom",
        ["orgs" | "enterprises", _, "audit-log"] => "audit_log",
        ["actions", "runner-registration"] if post => "actions_runner_registration",
        _ => "core",
    }
}

/// GitHub: the resource an answer names in `x-ratelimit-resource`, OWS
/// trimmed; `None` when absent, sent on more than one field line, empty,
/// longer than [`MAX_SCOPE_LEN`] bytes, or not a plain token (RFC 9110
/// `tchar`s).
pub(crate) fn github_answer_resource(headers: &HeaderMap) -> Option<&str> {
    let value = trim_ows(single(headers, &X_RATELIMIT_RESOURCE)?);
    let token = !value.is_empty() && value.len() <= MAX_SCOPE_LEN && value.iter().all(is_tchar);
    if !token {
        return None;
    }
    std::str::from_utf8(value).ok()
}

/// Discord: a request's route, as discord.js and twilight key it, and its
/// top-level resource (the "major parameter").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct DiscordRoute {
    /// The method, a space and the path with the API prefix (`/api`,
    /// `/api/v10`), the query and empty segments dropped, and then:
    /// snowflake ids as `:id`, the segment after `/webhooks/{id}` or
    /// `/interactions/{id}` (the token, whatever the id looks like) as
    /// `:token`, an interaction's id as `:id`, and everything after
    /// `/reactions/` as `:reaction` (all emoji and users of a message's
    /// reactions share one bucket). Cut at [`MAX_ROUTE_LEN`] bytes: a
    /// longer route keeps its head and ends with `~` and a digest of the
    /// whole.
    pub(crate) route: String,
    /// The top-level resource Discord counts a bucket per:
    /// `channels/{id}`, `guilds/{id}`, `webhooks/{id}`, or
    /// `webhooks/{id}/{digest}` for a webhook called with its token (the
    /// token itself is a secret and never kept: 16 hex digits of a digest
    /// of it tell two tokens apart). Empty when the path has none.
    pub(crate) major: String,
}

impl DiscordRoute {
    /// Whether the request counts against the bot's global limit. Discord's
    /// interaction endpoints do not: an interaction's callback
    /// (`/interactions/{id}/{token}/callback`) and its follow-ups
    /// (`/webhooks/{application id}/{token}/...`), which a path cannot tell
    /// from a webhook executed with its token (such a call carries no bot
    /// token either, so twilight exempts them all the same).
    pub(crate) fn under_global_limit(&self) -> bool {
        let path = self.route.split_once(' ').map_or("", |(_, path)| path);
        !(path == "/interactions/:id/:token/callback" || path.starts_with("/webhooks/:id/:token"))
    }
}

/// Discord: the route and top-level resource of a request; see
/// [`DiscordRoute`]. What discord.js keys by the request's body or age
/// (a channel's name or topic edit, the deletion of a message older than
/// two weeks) shares the route's key here: the answer's bucket tells them
/// apart.
pub(crate) fn discord_route(method: &Method, path: &str) -> DiscordRoute {
    let segments: Vec<&str> = segments(path).collect();
    let (top, id, token) = (
        segments.first().copied(),
        segments.get(1).copied().filter(|s| is_snowflake(s)),
        segments.get(2).copied(),
    );
    // A token is collapsed whatever the id looks like: it is a secret.
    let interaction = top == Some("interactions");
    let tokened = interaction || top == Some("webhooks");
    let major = match (top, id, token) {
        (Some(top @ ("channels" | "guilds")), Some(id), _) => format!("{top}/{id}"),
        (Some("webhooks"), Some(id), None) => format!("webhooks/{id}"),
        (Some("webhooks"), Some(id), Some(token)) => {
            let mut major = format!("webhooks/{id}/");
            push_hex(&mut major, &digest(token.as_bytes()).to_be_bytes());
            major
        }
        _ => String::new(),
    };
    let mut route = String::with_capacity(method.as_str().len() + 1 + path.len());
    route.push_str(method.as_str());
    route.push(' ');
    if segments.is_empty() {
        route.push('/');
    }
    for (i, segment) in segments.iter().enumerate() {
        route.push('/');
        if i > 0 && segments.get(i - 1) == Some(&"reactions") {
            route.push_str(":reaction");
            break;
        }
        route.push_str(match segment {
            _ if interaction && i == 1 => ":id",
            _ if tokened && i == 2 => ":token",
            s if is_snowflake(s) => ":id",
            s => s,
        });
    }
    DiscordRoute {
        route: bounded(route, MAX_ROUTE_LEN),
        major,
    }
}

/// Discord: which limit a 429 says was hit (`X-RateLimit-Scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiscordScope {
    /// `user`: the bot's own limit of this bucket.
    User,
    /// `global`: the bot's limit over all routes.
    Global,
    /// `shared`: the resource's limit, shared with everyone who uses it
    /// (such a 429 does not count as an invalid request).
    Shared,
}

/// Discord: what an answer says of its limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DiscordAnswer {
    /// `X-RateLimit-Bucket` (the bucket hash), OWS trimmed and cleaned as a
    /// key keeps it (printable ASCII, at most [`MAX_SCOPE_LEN`] bytes);
    /// `None` when absent, empty or sent on more than one field line.
    pub(crate) bucket: Option<String>,
    /// `X-RateLimit-Scope` (sent with 429s), or Global when
    /// `X-RateLimit-Global: true` (which wins over the scope field);
    /// `None` when neither says one of the three (ASCII case ignored).
    pub(crate) scope: Option<DiscordScope>,
}

/// Discord: the bucket and scope an answer names; see [`DiscordAnswer`].
pub(crate) fn discord_answer(headers: &HeaderMap) -> DiscordAnswer {
    let bucket = single(headers, &X_RATELIMIT_BUCKET)
        .map(trim_ows)
        .filter(|value| !value.is_empty())
        .map(|value| clean(&String::from_utf8_lossy(value)));
    let word = |name: &HeaderName| single(headers, name).map(trim_ows);
    let global = word(&X_RATELIMIT_GLOBAL).is_some_and(|v| v.eq_ignore_ascii_case(b"true"));
    let scope = if global {
        Some(DiscordScope::Global)
    } else {
        word(&X_RATELIMIT_SCOPE).and_then(|value| {
            [
                (&b"user"[..], DiscordScope::User),
                (&b"global"[..], DiscordScope::Global),
                (&b"shared"[..], DiscordScope::Shared),
            ]
            .into_iter()
            .find_map(|(name, scope)| value.eq_ignore_ascii_case(name).then_some(scope))
        })
    };
    DiscordAnswer { bucket, scope }
}

/// IETF draft (`RateLimit`, draft-10 and later): the partition key of the
/// answer's `RateLimit` field, the `pk` of its first well-formed item (a
/// policy name with `r`, as the rate-limit reader takes it) whose `pk` is
/// a non-empty Byte Sequence, as lowercase hex.
///
/// Hex, not the base64 sent: the Structured Fields parser accepts one key
/// in several base64 spellings (padding optional, trailing bits ignored),
/// and hex gives each key one text, with no `/`, `+` or `=`. A key longer
/// than 32 bytes keeps the hex of its head and ends with `~` and a digest
/// of the whole, to fit [`MAX_SCOPE_LEN`]. `None` when no item has one,
/// when the field does not parse as a List, or holds more than
/// [`MAX_POLICIES`] items (as the reader ignores it).
pub(crate) fn ietf_partition(headers: &HeaderMap) -> Option<String> {
    let value = combined(headers, &RATELIMIT)?;
    let list = List::parse(Parser::new(&value)).ok()?;
    if list.len() > MAX_POLICIES {
        return None;
    }
    list.iter().find_map(|entry| {
        policy(entry)?;
        let ListEntry::Item(item) = entry else {
            return None;
        };
        let key = item.params.get("pk")?.as_byte_sequence()?;
        if key.is_empty() {
            return None;
        }
        let mut hex = String::with_capacity(key.len() * 2);
        push_hex(&mut hex, key);
        Some(bounded(hex, MAX_SCOPE_LEN))
    })
}

/// The non-empty segments of a request path, the query and fragment
/// dropped, after an API prefix: `api`, then an optional version (`v3`,
/// `v10`).
fn segments(path: &str) -> impl Iterator<Item = &str> {
    let path = path
        .find(['?', '#'])
        .map_or(path, |end| path.get(..end).unwrap_or(path));
    let mut segments = path.split('/').filter(|s| !s.is_empty()).peekable();
    if segments.next_if_eq(&"api").is_some() {
        segments.next_if(|s| is_version(s));
    }
    segments
}

/// `v` and one to three ASCII digits: an API version segment.
fn is_version(segment: &str) -> bool {
    segment
        .strip_prefix('v')
        .is_some_and(|n| (1..=3).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

/// One to twenty ASCII digits: a Discord snowflake (a `u64`).
fn is_snowflake(segment: &str) -> bool {
    (1..=20).contains(&segment.len()) && segment.bytes().all(|b| b.is_ascii_digit())
}

/// `value` without leading and trailing spaces and tabs.
fn trim_ows(value: &[u8]) -> &[u8] {
    let ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = value.iter().position(|b| !ows(b)).unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|b| !ows(b))
        .map_or(start, |last| last + 1);
    value.get(start..end).unwrap_or_default()
}

/// An RFC 9110 `tchar`.
fn is_tchar(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b)
}

/// Lowercase hex of `bytes`, appended to `out`.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const HEX: [char; 16] = [
        '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f',
    ];
    for &b in bytes {
        out.extend([HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
    }
}

/// 64-bit FNV-1a: a digest that is the same in every build and process
/// (the store shares keys between them), not a secret-keeping hash.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `text` if at most `max` bytes; else its head (cut at a character
/// boundary) and `~` with 16 hex digits of the whole's digest, at most
/// `max` bytes in all.
pub(crate) fn bounded(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let whole = digest(text.as_bytes());
    let mut cut = max.saturating_sub(17);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push('~');
    push_hex(&mut text, &whole.to_be_bytes());
    text
}

pub(crate) mod stripe;

#[cfg(test)]
mod tests;
