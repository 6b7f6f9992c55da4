//! The GitHub-like server itself, against a bare reqwest client: each
//! task's last answer, and the plain `403` that takes the quota's last
//! request (it says `remaining: 0`, a primary-limit answer to a client).

use std::time::Duration;

use crate::server::github::{Answer, Config, GitHubServer};

#[tokio::test]
async fn github_server_records_last_answers_and_a_refusal_at_zero() {
    let server = GitHubServer::start(Config {
        quota: 2,
        window_secs: 3600,
        burst: 1000,
        span: Duration::from_secs(1),
        status: 403,
    })
    .await;
    let client = reqwest::Client::new();
    let get = |path: &str, task: u32| {
        client
            .get(format!("{}{path}", server.uri))
            .header("x-task", task)
            .send()
    };
    let remaining = |r: &reqwest::Response| {
        r.headers()
            .get("x-ratelimit-remaining")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let ok = get("/repos/o/r", 1).await.expect("answered");
    assert_eq!(
        (ok.status().as_u16(), remaining(&ok).as_deref()),
        (200, Some("1"))
    );
    // The quota's last request, refused: remaining 0, no retry-after.
    let refused = get("/forbidden/2", 2).await.expect("answered");
    assert_eq!(refused.status(), 403);
    assert_eq!(remaining(&refused).as_deref(), Some("0"));
    assert!(refused.headers().get("retry-after").is_none());
    let limited = get("/repos/o/r", 3).await.expect("answered");
    assert_eq!(limited.status(), 403);
    let seen = server.finish();

    assert_eq!(seen.tasks[&1].last, Some(Answer::Ok));
    assert_eq!(seen.tasks[&2].last, Some(Answer::Refused));
    assert!(seen.tasks[&2].refused_at_zero);
    assert!(!seen.tasks[&1].refused_at_zero);
    assert_eq!(seen.tasks[&3].last, Some(Answer::Primary));
    assert_eq!((seen.oks, seen.refused, seen.primary), (1, 1, 1));
}
