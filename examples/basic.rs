//! The shortest realistic use: add the middleware to a `reqwest::Client` you
//! already have, send with a deadline, and read the `RetryReport`.
//!
//! Runs without network: a local mock server answers `429 Retry-After: 1`
//! once, then `200`.
//!
//! ```text
//! cargo run --example basic
//! ```

use std::time::Duration;

use reqwest_backpressure::{Deadline, Policy, RetryAfterMiddleware, RetryReport};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A stand-in for a rate-limited API: the first GET /items is pushed back
    // for one second, the next one succeeds.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/items"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/items"))
        .respond_with(ResponseTemplate::new(200).set_body_string("[]"))
        .mount(&server)
        .await;

    // Your existing client, with its own settings (here a per-attempt timeout)...
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    // ...wrapped once: up to 4 sends per request, never before Retry-After.
    let client = reqwest_middleware::ClientBuilder::new(client)
        .with(RetryAfterMiddleware::new(Policy::default().max_attempts(4)))
        .build();

    // The deadline bounds the whole task: every attempt and every wait.
    let response = client
        .get(format!("{}/items", server.uri()))
        .with_extension(Deadline::after(Duration::from_secs(10)))
        .send()
        .await?;

    // Every response that went through the middleware carries a report.
    let report = *response
        .extensions()
        .get::<RetryReport>()
        .expect("the middleware adds a RetryReport to every response");
    println!("status:   {}", response.status());
    println!("attempts: {}", report.attempts());
    println!("waited:   {} ms", report.waited().as_millis());
    match report.stop_reason() {
        // The server still said no: the caller gets its response and a stable code.
        Some(reason) => println!("stopped:  {}", reason.code()),
        None => println!("body:     {}", response.text().await?),
    }
    Ok(())
}
