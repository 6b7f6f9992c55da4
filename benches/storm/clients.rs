//! The clients compared, one per row: built fresh for every row.

use reqwest_backpressure::{Policy, Quota, RetryAfterMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;

use crate::config::ClientKind;
use crate::declared::declare;

impl ClientKind {
    /// A fresh client of this kind (not the Redis row's: its clients live in
    /// its worker processes) for the server at `url`; ours declare `quota`
    /// for its origin if given (`STORM_DECLARE`), the others ignore it.
    pub(crate) fn client(self, url: &str, quota: Option<Quota>) -> ClientWithMiddleware {
        let inner = reqwest::Client::builder()
            .build()
            .expect("reqwest client builds");
        let builder = ClientBuilder::new(inner);
        match self {
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis => {
                unreachable!("the Redis row's clients live in its worker processes")
            }
            ClientKind::NoRetry => builder.build(),
            ClientKind::ReqwestRetry => builder
                .with(RetryTransientMiddleware::new_with_policy(
                    ExponentialBackoff::builder().build_with_max_retries(3),
                ))
                .build(),
            ClientKind::Backpressure => builder
                .with(RetryAfterMiddleware::new(declare(
                    Policy::default(),
                    url,
                    quota,
                )))
                .build(),
        }
    }
}
