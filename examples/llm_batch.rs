//! An LLM batch job: 100 chat completions sent 32 at a time, each
//! declaring its token cost, against an API that limits requests and
//! tokens per window and states both in OpenAI's headers.
//!
//! ```text
//! cargo run --example llm_batch
//! ```
//!
//! The API here is an embedded OpenAI-like server on 127.0.0.1 (the test
//! suite's, `tests/support/server/llm.rs`): 40 requests and 3,000 tokens a
//! second, `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` on every
//! answer, `429` with `retry-after-ms` past either quota. The client reads
//! those headers and holds each request until the quotas have room for
//! it, so the batch takes about as many seconds as the quotas require and
//! the server answers (almost) no `429`. Against the real API, change the
//! URL, add your key, and size the batch; the rest stays.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest_backpressure::{
    Cost, Deadline, IdempotencyKey, Policy, RateLimitHeaders, RetryAfterMiddleware,
};
use reqwest_middleware::ClientBuilder;

/// The test servers (shared with the tests and the benches); this example
/// uses the LLM-like one only.
#[path = "../tests/support/server.rs"]
mod server;

use server::llm::{LlmConfig, LlmServer};

/// Requests in flight at once. More than the API admits per window is
/// fine: the middleware holds the rest; this only bounds the sockets.
const IN_FLIGHT: usize = 32;

#[tokio::main]
async fn main() -> ExitCode {
    // The API's limits for your key are not configured here: the client
    // learns them from the first answer's headers. (The server below
    // stands in for the API; its numbers are what your key's quotas would
    // be.)
    let limits = LlmConfig::new(40, 3_000);
    let api = LlmServer::start(limits).await;

    // OpenAI's headers; `RateLimitHeaders::anthropic()` for Anthropic's.
    // Everything else is the default: 3 attempts per request, a 120 s
    // deadline, the origin's quotas shared by every request of this client.
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::openai());
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(RetryAfterMiddleware::new(policy))
        .build();

    let prompts: Vec<String> = (0..100)
        .map(|i| format!("Summarise document {i}."))
        .collect();
    let start = Instant::now();
    let outcomes = futures_util::stream::iter(prompts.iter().enumerate())
        .map(|(i, prompt)| {
            let (client, url) = (client.clone(), api.url.clone());
            async move {
                // The cost the API will count for this request: the
                // prompt's tokens plus `max_tokens` (OpenAI reserves
                // `max_tokens` up front). Use your tokenizer for the
                // prompt; a rough estimate (bytes / 4) errs on the
                // cautious side only if you round up.
                let max_tokens = [32, 64, 128][i % 3];
                let cost = estimate_prompt_tokens(prompt) + max_tokens;
                let body = format!(
                    r#"{{"model":"gpt-4o-mini","max_tokens":{max_tokens},"messages":[{{"role":"user","content":"{prompt}"}}]}}"#
                );
                client
                    .post(url)
                    // Your key: .bearer_auth(std::env::var("OPENAI_API_KEY")?)
                    .header("content-type", "application/json")
                    // The embedded server counts this header as the
                    // request's cost (a real API counts the body itself),
                    // and `x-task` to tell its tasks apart.
                    .header("x-cost", cost.to_string())
                    .header("x-task", i.to_string())
                    .body(body)
                    // What the request spends of the token quota: it is
                    // held until the quota has room for it.
                    .with_extension(Cost::new(cost))
                    // A POST is retried only with a key (the API applies a
                    // repeated key once): one per logical request.
                    .with_extension(IdempotencyKey::new(format!("batch-7-doc-{i}")))
                    // How long this request may take, waits included.
                    .with_extension(Deadline::after(Duration::from_secs(60)))
                    .send()
                    .await
                    .map(|r| r.status().is_success())
                    .unwrap_or(false)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<bool>>()
        .await;
    let wall = start.elapsed();

    let ok = outcomes.iter().filter(|&&ok| ok).count();
    let seen = api.finish();
    println!(
        "{ok}/{} completions ok in {:.2} s",
        outcomes.len(),
        wall.as_secs_f64()
    );
    println!(
        "the API saw {} requests, answered {} × 429 ({} after its first answer)",
        seen.requests,
        seen.rejected,
        seen.rejected_after_first_ok()
    );
    for w in seen.windows() {
        println!(
            "  second {}: {:>3} requests, {:>5} tokens (quotas: {} requests, {} tokens)",
            w.index, w.requests, w.tokens, limits.requests, limits.tokens
        );
    }
    if ok == outcomes.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A rough token count: about four bytes a token for English text,
/// rounded up.
fn estimate_prompt_tokens(prompt: &str) -> u64 {
    u64::try_from(prompt.len().div_ceil(4)).unwrap_or(u64::MAX)
}
