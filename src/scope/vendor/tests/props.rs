//! Any input: no panic, bounded keys.

use http::{HeaderMap, HeaderValue, Method};
use proptest::prelude::*;

use super::super::*;
use super::{byte_sequence, headers, hex};

/// A path of Discord-like and hostile segments.
fn path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just("channels".to_owned()),
        Just("guilds".to_owned()),
        Just("webhooks".to_owned()),
        Just("interactions".to_owned()),
        Just("reactions".to_owned()),
        Just("callback".to_owned()),
        Just("api".to_owned()),
        Just("v10".to_owned()),
        Just(String::new()),
        "[0-9]{1,25}",
        "\\PC{0,12}",
        "[?#/~:]{1,3}",
    ];
    proptest::collection::vec(segment, 0..40).prop_map(|s| s.join("/"))
}

fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        Just(Method::GET),
        Just(Method::POST),
        Just(Method::DELETE),
        "[A-Z]{1,300}".prop_map(|m| Method::from_bytes(m.as_bytes()).expect("a token method")),
    ]
}

proptest! {
    /// Any method and path: a route of bounded length that starts with the
    /// method, a major that fits a scope, a GitHub resource from the list.
    #[test]
    fn any_request_gives_bounded_keys(method in method(), path in prop_oneof![path(), "\\PC{0,600}"]) {
        let route = discord_route(&method, &path);
        prop_assert!(route.route.len() <= MAX_ROUTE_LEN, "{}", route.route.len());
        let head = format!("{method} ");
        prop_assert!(route.route.starts_with(&head) || route.route.contains('~'));
        prop_assert!(route.major.len() <= MAX_SCOPE_LEN, "{}", route.major);
        let known = [
            "core", "search", "code_search", "graphql", "integration_manifest",
            "dependency_snapshots", "dependency_sbom", "audit_log",
            "actions_runner_registration",
        ];
        prop_assert!(known.contains(&github_resource_of(&method, &path)));
    }

    /// Any two snowflakes: the same route; the same major exactly when the
    /// same channel.
    #[test]
    fn snowflakes_collapse_into_the_route_and_split_the_major(
        a in 0u64.., b in 0u64.., tail in "(/messages(/[0-9]{17,19})?)?"
    ) {
        let ra = discord_route(&Method::GET, &format!("/channels/{a}{tail}"));
        let rb = discord_route(&Method::GET, &format!("/channels/{b}{tail}"));
        prop_assert_eq!(&ra.route, &rb.route);
        prop_assert!(!ra.route.contains(&a.to_string()));
        prop_assert_eq!(ra.major == rb.major, a == b);
    }

    /// Any header bytes: answers read without a panic, and what they name
    /// fits a scope.
    #[test]
    fn any_answer_bytes_give_bounded_names(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 1..4),
        name in 0usize..5
    ) {
        let names = [
            "x-ratelimit-resource", "x-ratelimit-bucket", "x-ratelimit-scope",
            "x-ratelimit-global", "ratelimit",
        ];
        let mut map = HeaderMap::new();
        for value in &values {
            if let Ok(value) = HeaderValue::from_bytes(value) {
                map.append(names[name], value);
            }
        }
        if let Some(resource) = github_answer_resource(&map) {
            prop_assert!(!resource.is_empty() && resource.len() <= MAX_SCOPE_LEN);
        }
        let answer = discord_answer(&map);
        if let Some(bucket) = answer.bucket {
            prop_assert!(bucket.len() <= MAX_SCOPE_LEN);
            prop_assert!(bucket.chars().all(|c| c.is_ascii_graphic() && c != '#'));
        }
        if let Some(pk) = ietf_partition(&map) {
            prop_assert!(!pk.is_empty() && pk.len() <= MAX_SCOPE_LEN);
            prop_assert!(pk.bytes().all(|c| c.is_ascii_hexdigit() || c == b'~'));
        }
    }

    /// Any Byte Sequence key: its hex when it fits, else a bounded text.
    #[test]
    fn any_partition_key_reads_back(key in proptest::collection::vec(any::<u8>(), 1..80)) {
        let map = headers(&[("ratelimit", &format!("\"p\";r=1;pk={}", byte_sequence(&key)))]);
        let pk = ietf_partition(&map).expect("a key");
        if key.len() * 2 <= MAX_SCOPE_LEN {
            prop_assert_eq!(pk, hex(&key));
        } else {
            prop_assert!(pk.len() <= MAX_SCOPE_LEN);
            prop_assert!(pk.starts_with(&hex(&key[..20])));
        }
    }
}
