//! GitHub: the resources its documents name.

use http::{HeaderMap, HeaderValue, Method};

use super::super::*;
use super::headers;

#[test]
fn github_requests_count_against_the_resources_github_documents() {
    let (get, post) = (Method::GET, Method::POST);
    let cases = [
        (
            &get,
            "/search/code?q=addClass+repo:jquery/jquery",
            "code_search",
        ),
        (&get, "/search/issues?q=is:open", "search"),
        (&get, "/search/repositories", "search"),
        (&get, "/search/commits", "search"),
        (&get, "/search/users", "search"),
        (&get, "/search/topics", "search"),
        (&get, "/search/labels", "search"),
        (&post, "/graphql", "graphql"),
        (
            &post,
            "/app-manifests/a1b2c3/conversions",
            "integration_manifest",
        ),
        (
            &post,
            "/repos/o/r/dependency-graph/snapshots",
            "dependency_snapshots",
        ),
        (&get, "/repos/o/r/dependency-graph/sbom", "dependency_sbom"),
        (&get, "/orgs/acme/audit-log?phrase=action:repo", "audit_log"),
        (&get, "/enterprises/avocado-corp/audit-log", "audit_log"),
        (
            &post,
            "/actions/runner-registration",
            "actions_runner_registration",
        ),
        // GitHub Enterprise Server's prefixes.
        (&get, "/api/v3/search/code", "code_search"),
        (&post, "/api/graphql", "graphql"),
        (&get, "/api/v3/repos/o/r", "core"),
        // What the documents put under `core`.
        (&get, "/repos/o/r/issues", "core"),
        (&get, "/rate_limit", "core"),
        (&post, "/repos/o/r/code-scanning/sarifs", "core"),
        (
            &post,
            "/orgs/acme/actions/runners/registration-token",
            "core",
        ),
        (
            &post,
            "/repos/o/r/actions/runners/registration-token",
            "core",
        ),
        (&get, "/repos/o/r/import", "core"),
        // Only the documented method and shape.
        (&get, "/app-manifests/a1b2c3/conversions", "core"),
        (&get, "/repos/o/r/dependency-graph/compare/a...b", "core"),
        (&get, "/search", "core"),
        (&get, "/repos/search/code", "core"),
        (&get, "", "core"),
    ];
    for (method, path, resource) in cases {
        assert_eq!(
            github_resource_of(method, path),
            resource,
            "{method} {path}"
        );
    }
}

#[test]
fn a_github_answer_names_its_resource_as_a_plain_token() {
    let read = |value: &str| {
        let map = headers(&[("x-ratelimit-resource", value)]);
        github_answer_resource(&map).map(str::to_owned)
    };
    for name in ["core", "search", "code_search", "graphql", "audit_log"] {
        assert_eq!(read(name).as_deref(), Some(name));
    }
    assert_eq!(read(" \tscim ").as_deref(), Some("scim"));
    for bad in ["", "  ", "core search", "core,search", "\"core\"", "a/b"] {
        assert_eq!(read(bad), None, "{bad:?}");
    }
    assert_eq!(read(&"x".repeat(MAX_SCOPE_LEN)).map(|r| r.len()), Some(64));
    assert_eq!(read(&"x".repeat(MAX_SCOPE_LEN + 1)), None);
    assert_eq!(github_answer_resource(&HeaderMap::new()), None);
    let twice = headers(&[
        ("x-ratelimit-resource", "core"),
        ("x-ratelimit-resource", "search"),
    ]);
    assert_eq!(github_answer_resource(&twice), None);
    let mut raw = HeaderMap::new();
    raw.insert(
        "x-ratelimit-resource",
        HeaderValue::from_bytes(b"c\xc3\xb6re").expect("obs-text is a valid value"),
    );
    assert_eq!(github_answer_resource(&raw), None);
}
