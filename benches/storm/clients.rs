//! The clients compared, one per row: built fresh for every row.

use reqwest_backpressure::{Policy, Quota, RetryAfterMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;

use crate::config::ClientKind;
use crate::declared::declare;
use crate::server::tap::Tap;

impl ClientKind {
    /// A fresh client of this kind (not the Redis row's: its clients live in
    /// its worker processes) for the server at `url`; ours declare `quota`
    /// for its origin if given (`STORM_DECLARE`), the others ignore it.
    pub(crate) fn client(self, url: &str, quota: Option<Quota>) -> ClientWithMiddleware {
        self.with_policy(declare(Policy::default(), url, quota), None)
    }

    /// A fresh client of this kind (not the Redis row's), ours with
    /// `policy` (the others ignore it), and `tap` innermost if given (after
    /// ours or reqwest-retry: it logs each send that leaves for the network
    /// and each answer that comes back).
    pub(crate) fn with_policy(self, policy: Policy, tap: Option<Tap>) -> ClientWithMiddleware {
        let inner = reqwest::Client::builder()
            .build()
            .expect("reqwest client builds");
        let builder = ClientBuilder::new(inner);
        let builder = match self {
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis => {
                unreachable!("the Redis row's clients live in its worker processes")
            }
            ClientKind::NoRetry => builder,
            ClientKind::ReqwestRetry => builder.with(RetryTransientMiddleware::new_with_policy(
                ExponentialBackoff::builder().build_with_max_retries(3),
            )),
            ClientKind::Backpressure => builder.with(RetryAfterMiddleware::new(policy)),
        };
        match tap {
            Some(tap) => builder.with(tap),
            None => builder,
        }
        .build()
    }
}
