//! Declared scopes over real HTTP: a request named into a scope
//! ([`Scope`] or a policy rule) falls under its scope's limit and its
//! origin's, each obeyed; a pushback in a scope holds that scope only.

use std::time::Duration;

use http::Method;
use reqwest_backpressure::{Policy, Quota, Scope};
use reqwest_middleware::ClientWithMiddleware;
use tokio::time::Instant;

use crate::common::{client, exact, ok, report, scripted, too_many};

/// The most arrivals in `times` within any span of `span`.
pub(crate) fn most_within(times: &[Instant], span: Duration) -> usize {
    let mut sorted = times.to_vec();
    sorted.sort();
    (0..sorted.len())
        .map(|i| {
            sorted[i..]
                .iter()
                .take_while(|t| **t - sorted[i] < span)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// `n` GETs of `url/scope/i`, each in the [`Scope`] `scope` when given.
fn spawn_in(
    client: &ClientWithMiddleware,
    url: &str,
    path: &str,
    scope: Option<&str>,
    n: usize,
) -> Vec<tokio::task::JoinHandle<reqwest_middleware::Result<reqwest::Response>>> {
    (0..n)
        .map(|i| {
            let client = client.clone();
            let url = format!("{url}/{path}/{i}");
            let scope = scope.map(Scope::new);
            tokio::spawn(async move {
                let mut request = client.get(url);
                if let Some(scope) = scope {
                    request = request.with_extension(scope);
                }
                request.send().await
            })
        })
        .collect()
}

async fn all_ok(
    tasks: Vec<tokio::task::JoinHandle<reqwest_middleware::Result<reqwest::Response>>>,
) {
    for t in tasks {
        let r = t.await.expect("task").expect("response");
        assert_eq!(r.status(), 200, "{:?}", report(&r).stop_reason());
    }
}

#[tokio::test]
async fn each_declared_scope_spends_its_own_quota_at_once() {
    let (server, arrivals) = scripted(|_, _| ok()).await;
    let origin = server.uri();
    let policy = exact()
        .scope_quota(&origin, "t1", Quota::per_second(3))
        .scope_quota(&origin, "t2", Quota::per_second(3));
    let client = client(policy);
    let start = Instant::now();
    let mut tasks = spawn_in(&client, &origin, "t1", Some("t1"), 6);
    tasks.extend(spawn_in(&client, &origin, "t2", Some("t2"), 6));
    all_ok(tasks).await;
    let entries = arrivals.entries();
    let of = |p: &str| -> Vec<Instant> {
        entries
            .iter()
            .filter(|a| a.path.starts_with(p))
            .map(|a| a.at)
            .collect()
    };
    let (t1, t2) = (of("/t1/"), of("/t2/"));
    assert_eq!((t1.len(), t2.len()), (6, 6));
    // Each scope at its own 3 a second; neither waits for the other's.
    for (name, times) in [("t1", &t1), ("t2", &t2)] {
        let most = most_within(times, Duration::from_millis(990));
        assert!(most <= 3, "{name}: {most} within a second");
    }
    let last = entries.iter().map(|a| a.at).max().expect("arrivals");
    let took = last - start;
    assert!(
        took < Duration::from_millis(2_500),
        "the two scopes' 6 each took {took:?}: one quota for both would take 3 s"
    );
}

#[tokio::test]
async fn an_origin_quota_binds_every_scope_together() {
    let (server, arrivals) = scripted(|_, _| ok()).await;
    let origin = server.uri();
    let policy = exact()
        .quota(&origin, Quota::per_second(4))
        .scope_quota(&origin, "t1", Quota::per_second(3))
        .scope_quota(&origin, "t2", Quota::per_second(3));
    let client = client(policy);
    let mut tasks = spawn_in(&client, &origin, "t1", Some("t1"), 6);
    tasks.extend(spawn_in(&client, &origin, "t2", Some("t2"), 6));
    all_ok(tasks).await;
    let all: Vec<Instant> = arrivals.entries().iter().map(|a| a.at).collect();
    assert_eq!(all.len(), 12);
    let most = most_within(&all, Duration::from_millis(990));
    assert!(most <= 4, "{most} within a second, over the origin's 4");
    for p in ["/t1/", "/t2/"] {
        let times: Vec<Instant> = arrivals
            .entries()
            .iter()
            .filter(|a| a.path.starts_with(p))
            .map(|a| a.at)
            .collect();
        let most = most_within(&times, Duration::from_millis(990));
        assert!(most <= 3, "{p}: {most} within a second, over its 3");
    }
}

#[tokio::test]
async fn a_pushback_in_a_scope_holds_that_scope_not_the_origin() {
    // t1's first request is told to come back in 2 s; t2 is never limited.
    let (server, arrivals) = scripted(|path, i| {
        if path.starts_with("/t1/") && i == 0 {
            too_many("2")
        } else {
            ok()
        }
    })
    .await;
    let origin = server.uri();
    let client = client(exact());
    let start = Instant::now();
    let first = client
        .get(format!("{origin}/t1/0"))
        .with_extension(Scope::new("t1"))
        .send();
    let first = tokio::spawn(first);
    arrivals.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Sent while t1 is held: t2 goes at once, t1 waits for the time named.
    let t2 = spawn_in(&client, &origin, "t2", Some("t2"), 3);
    let t1 = spawn_in(&client, &origin, "t1x", Some("t1"), 1);
    all_ok(t2).await;
    all_ok(t1).await;
    let r = first.await.expect("task").expect("response");
    assert_eq!(r.status(), 200);
    assert_eq!(report(&r).attempts(), 2);
    let entries = arrivals.entries();
    let told = entries[0].at;
    for a in &entries[1..] {
        let since = a.at - told;
        if a.path.starts_with("/t2/") {
            assert!(
                a.at - start < Duration::from_millis(1_500),
                "{}: held with t1 ({since:?} after t1's 429)",
                a.path
            );
        } else {
            assert!(
                since >= Duration::from_secs(2),
                "{} sent {since:?} after t1 was told 2 s",
                a.path
            );
        }
    }
}

#[tokio::test]
async fn a_rule_puts_requests_in_a_scope_by_method_and_path() {
    // Searches are told to wait 2 s; reads go on meanwhile.
    let (server, arrivals) = scripted(|path, i| {
        if path.starts_with("/search") && i == 0 {
            too_many("2")
        } else {
            ok()
        }
    })
    .await;
    let origin = server.uri();
    let policy = exact().scope_rule(&origin, Some(Method::GET), "/search", "search");
    let client = client(policy);
    let search = tokio::spawn(client.get(format!("{origin}/search")).send());
    arrivals.wait_for(1).await;
    let told = Instant::now();
    let reads = spawn_in(&client, &origin, "repos", None, 3);
    all_ok(reads).await;
    let r = search.await.expect("task").expect("response");
    assert_eq!(r.status(), 200);
    let entries = arrivals.entries();
    let at = |p: &str| -> Vec<Instant> {
        entries
            .iter()
            .filter(|a| a.path.starts_with(p))
            .map(|a| a.at)
            .collect()
    };
    assert!(
        at("/repos/")
            .iter()
            .all(|t| *t - told < Duration::from_millis(1_500)),
        "a read held with the searches"
    );
    let searches = at("/search");
    assert_eq!(searches.len(), 2);
    assert!(searches[1] - searches[0] >= Duration::from_secs(2));
}

#[test]
fn a_scope_name_is_kept_printable_and_bounded() {
    assert_eq!(Scope::new("tenant 7#a").as_str(), "tenant_7_a");
    assert_eq!(Scope::new("").as_str(), "_");
    assert!(Scope::new("é".repeat(500)).as_str().len() <= reqwest_backpressure::MAX_SCOPE_LEN);
    assert!(Policy::default().max_scopes(0).validate().is_ok());
}
