//! An LLM batch whose costs are not declared, shared through Redis: the
//! coalescing store writes every statement of a cost quota through (its
//! count corrects what admissions spent on the mean, and its request is no
//! longer out), so each window fills in rounds as in one process. Counted
//! as successes only, the window's requests would stay out in the shared
//! state and hold the later rounds until the reset.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest_backpressure::{IdempotencyKey, RateLimitHeaders};

use super::support::*;
use crate::server::llm::{LlmConfig, LlmServer, costs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeclared_costs_fill_each_window_through_redis() {
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start();
        let store = store(&redis, "rbp-llm:").await;
        // Tokens bind: 120 requests of about 80 tokens, 2,000 a window.
        let config = LlmConfig::new(1_000, 2_000);
        let costs = costs(0x9e37_79b9_7f4a_7c15, 120);
        let ideal = config.ideal_windows(&costs);
        let server = LlmServer::start(config).await;
        let c = client(
            store,
            policy().rate_limit_headers(RateLimitHeaders::openai()),
        );
        let statuses = futures_util::stream::iter(costs.iter().copied().enumerate())
            .map(|(i, cost)| {
                let (c, url) = (c.clone(), server.url.clone());
                async move {
                    let r = c
                        .post(url)
                        .header("x-task", i.to_string())
                        .header("x-cost", cost.to_string())
                        .body(r#"{"model":"m","messages":[]}"#)
                        .with_extension(IdempotencyKey::new(format!("llm-redis-{i}")))
                        .send()
                        .await;
                    r.map_or(0, |r| r.status().as_u16())
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<u16>>()
            .await;
        let seen = server.finish();
        let windows = seen.windows();
        let log: String = windows
            .iter()
            .map(|w| {
                format!(
                    "window {}: {} ok, {} tokens, {} × 429\n",
                    w.index, w.requests, w.tokens, w.rejected
                )
            })
            .collect();
        assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}\n{log}");
        // Each window but the last filled to within a few requests (the
        // headroom of the last rounds): no window left at its first round.
        for w in windows.iter().take(windows.len().saturating_sub(1)) {
            assert!(
                w.tokens + 4 * 140 >= config.tokens,
                "window {} admitted {} of {} tokens\n{log}",
                w.index,
                w.tokens,
                config.tokens
            );
        }
        assert!(
            windows.len() <= ideal + 1,
            "{} windows, ideal {ideal}\n{log}",
            windows.len()
        );
    })
    .await;
}
