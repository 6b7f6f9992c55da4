//! A socket-less terminal middleware answering `200` to everything and
//! recording each arrival on tokio's clock, so that a test on the paused
//! clock (`start_paused`) runs a backlog of minutes in no real time.

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_backpressure::{Policy, RetryAfterMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};

use crate::common::http_client;
use crate::server::Arrivals;

/// The origin the offline client's requests go to (nothing listens).
pub(super) const URL: &str = "http://offline.test/";

/// The terminal: records, answers `200`.
struct Offline(Arrivals);

#[async_trait::async_trait]
impl Middleware for Offline {
    async fn handle(
        &self,
        req: Request,
        _extensions: &mut Extensions,
        _next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        self.0.push(req.url().path(), None);
        let answer = http::Response::builder()
            .status(200)
            .body(Vec::<u8>::new())
            .expect("a valid response");
        Ok(Response::from(answer))
    }
}

/// A client with our middleware on `policy`, then the offline terminal;
/// returns the arrival log too.
pub(super) fn offline(policy: Policy) -> (ClientWithMiddleware, Arrivals) {
    let arrivals = Arrivals::default();
    let client = ClientBuilder::new(http_client())
        .with(RetryAfterMiddleware::new(policy))
        .with(Offline(arrivals.clone()))
        .build();
    (client, arrivals)
}
