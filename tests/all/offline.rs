//! A socket-less server for paused-clock tests (`start_paused`): a
//! terminal middleware answering each request with the status its script
//! names, recording arrivals on tokio's clock, so a backlog of minutes
//! runs in no real time.

use http::Extensions;
use reqwest::{Request, Response, ResponseBuilderExt};
use reqwest_backpressure::{RetryAfterMiddleware, Store};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};

use crate::common::http_client;
use crate::server::Arrivals;

/// The origin the offline tests call (never resolved: nothing is sent).
pub(crate) const URL: &str = "http://origin.test/";

/// Answers the `i`-th request (0-based) with `script(i)`, a status.
struct Offline<F> {
    arrivals: Arrivals,
    script: F,
}

#[async_trait::async_trait]
impl<F> Middleware for Offline<F>
where
    F: Fn(usize) -> u16 + Send + Sync + 'static,
{
    async fn handle(
        &self,
        req: Request,
        _extensions: &mut Extensions,
        _next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let i = self.arrivals.push(req.url().path(), None);
        let response = http::Response::builder()
            .status((self.script)(i))
            .url(req.url().clone())
            .body(Vec::<u8>::new())
            .expect("a valid response");
        Ok(Response::from(response))
    }
}

/// A client with `middleware` in front of a socket-less server answering
/// the `i`-th request with status `script(i)`; the arrival log too.
pub(crate) fn offline<S, F>(
    middleware: RetryAfterMiddleware<S>,
    script: F,
) -> (ClientWithMiddleware, Arrivals)
where
    S: Store,
    F: Fn(usize) -> u16 + Send + Sync + 'static,
{
    let arrivals = Arrivals::default();
    let client = ClientBuilder::new(http_client())
        .with(middleware)
        .with(Offline {
            arrivals: arrivals.clone(),
            script,
        })
        .build();
    (client, arrivals)
}
