//! The middleware: reads the request's contract (deadline, key, method,
//! body) and hands it to a [`Task`](crate::task::Task).

use http::header::HeaderName;
use http::{Extensions, Method};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use tokio::time::Instant;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::Error;
use crate::extensions::{Cost, Deadline, IdempotencyKey};
use crate::http_origin::origin_of;
use crate::observe::Observer;
use crate::planner::Planner;
use crate::policy::{InvalidPolicy, Policy};
use crate::scope::{Route, Scope};
use crate::store::{MemoryStore, Store};
use crate::task::{Contract, Shared, Task};
use crate::util::far_future;

/// The `Idempotency-Key` request header (IETF httpapi draft).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// A [`reqwest_middleware::Middleware`] that retries pushed-back requests
/// (`429` and `503`) no earlier than the server allows (or, when it names
/// no time, behind its origin's gate), within bounded budgets and an
/// absolute per-task deadline.
///
/// ```no_run
/// use std::time::Duration;
/// use reqwest_backpressure::{Deadline, IdempotencyKey, Policy, RetryAfterMiddleware, RetryReport};
///
/// # async fn run() -> Result<(), reqwest_middleware::Error> {
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(RetryAfterMiddleware::new(Policy::default()))
///     .build();
///
/// // Idempotent: retried on 429 within the budgets and the deadline.
/// let r = client
///     .get("http://localhost:8080/items")
///     .with_extension(Deadline::after(Duration::from_secs(10)))
///     .send()
///     .await?;
///
/// // Not idempotent: retried only because the caller supplied a key.
/// let r = client
///     .post("http://localhost:8080/orders")
///     .with_extension(IdempotencyKey::new("order-42"))
///     .send()
///     .await?;
/// let report = r.extensions().get::<RetryReport>().expect("always present");
/// println!("{} attempts, stop: {:?}", report.attempts(), report.stop_reason().map(|s| s.code()));
/// # Ok(()) }
/// ```
///
/// # Redirects
///
/// reqwest follows redirects by default. The gate, pacing, the recorded
/// answer and the logs belong to the origin that answered
/// ([`Response::url`]): a `429` from a redirect's target closes the
/// target's gate, not the gate of the origin the request was sent to. A
/// retry of a redirected request is sent to the request's own URL again
/// (reqwest follows the redirect anew); it leaves no earlier than the
/// server's time all the same, and asks the request's origin for admission.
///
/// Place it *before* `reqwest-tracing`'s middleware (so each attempt gets its
/// own span, with the [`Attempt`](crate::Attempt) extension to read) and do not combine it
/// with another retry middleware on the same statuses.
pub struct RetryAfterMiddleware<S = MemoryStore> {
    planner: Result<Planner, InvalidPolicy>,
    /// Shared with what tasks leave running when they end (a lease's or a
    /// slot's give-back the store did not finish at once).
    store: Arc<S>,
    /// The observer, and caps on requests in flight by origin.
    shared: Shared,
}

impl<S: std::fmt::Debug> std::fmt::Debug for RetryAfterMiddleware<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryAfterMiddleware")
            .field("planner", &self.planner)
            .field("store", &self.store)
            .field("observer", &self.shared.observer.is_some())
            .finish()
    }
}

impl Default for RetryAfterMiddleware<MemoryStore> {
    fn default() -> Self {
        Self::new(Policy::default())
    }
}

impl RetryAfterMiddleware<MemoryStore> {
    /// The middleware with `policy` and an in-memory store.
    ///
    /// An invalid policy never panics: the middleware then refuses every
    /// request with [`Error::InvalidPolicy`] and sends nothing. Use
    /// [`try_new`](Self::try_new) to find out at build time.
    #[must_use]
    pub fn new(policy: Policy) -> Self {
        Self::with_store(policy, MemoryStore::new())
    }

    /// The middleware with `policy`, or why the policy is invalid.
    pub fn try_new(policy: Policy) -> Result<Self, InvalidPolicy> {
        Self::try_with_store(policy, MemoryStore::new())
    }
}

impl<S: Store> RetryAfterMiddleware<S> {
    /// The middleware with `policy` and `store` (see [`new`](RetryAfterMiddleware::new)
    /// for an invalid policy).
    #[must_use]
    pub fn with_store(policy: Policy, store: S) -> Self {
        let planner = Planner::new(policy);
        #[cfg(feature = "tracing")]
        if let Err(e) = &planner {
            tracing::error!(target: "reqwest_backpressure::middleware", error = %e, "reqwest-backpressure: invalid policy; every request will be refused");
        }
        RetryAfterMiddleware {
            planner,
            store: Arc::new(store),
            shared: Shared::default(),
        }
    }

    /// The middleware with `policy` and `store`, or why the policy is invalid.
    pub fn try_with_store(policy: Policy, store: S) -> Result<Self, InvalidPolicy> {
        Ok(RetryAfterMiddleware {
            planner: Ok(Planner::new(policy)?),
            store: Arc::new(store),
            shared: Shared::default(),
        })
    }

    /// Attaches an [`Observer`]: it is told when tasks wait, send and stop,
    /// and when origins' gates close and reopen (see
    /// [`observe`](crate::observe)).
    #[must_use]
    pub fn with_observer(mut self, observer: impl Observer) -> Self {
        self.shared.observer = Some(Arc::new(observer));
        self
    }

    /// The store holding this middleware's shared state.
    #[must_use]
    pub fn store(&self) -> &S {
        &self.store
    }
}

/// Whether `method` is idempotent (RFC 9110 §9.2.2).
#[must_use]
pub fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

impl<S: Store> RetryAfterMiddleware<S> {
    /// Reads the request's contract and builds its task: everything before
    /// the first store call, without awaiting anything.
    #[allow(clippy::type_complexity)]
    fn task<'a>(
        &'a self,
        mut req: Request,
        extensions: &Extensions,
    ) -> Result<
        (
            Task<'a, S>,
            Instant,
            Request,
            Option<IdempotencyKey>,
            Contract,
        ),
        Error,
    > {
        let planner = match &self.planner {
            Ok(p) => p,
            Err(e) => return Err(Error::InvalidPolicy(e.clone())),
        };
        let start = Instant::now();
        let deadline = match extensions.get::<Deadline>() {
            Some(d) => d.instant(),
            None => start
                .checked_add(planner.policy().default_deadline)
                .unwrap_or_else(|| far_future(start)),
        };
        if start >= deadline {
            return Err(Error::DeadlineExhausted);
        }

        // The task key: the caller's own header (sent as written), else the
        // extension, sent in the policy's form. The task is keyed by the
        // key itself, never by how it was written.
        let key = match req.headers().get(&IDEMPOTENCY_KEY) {
            Some(value) => {
                Some(IdempotencyKey::from_header(value).ok_or(Error::InvalidIdempotencyKey)?)
            }
            None => match extensions.get::<IdempotencyKey>() {
                // Never sent: it only authorises the retry and keys the task.
                Some(key) if key.is_local() => {
                    if !key.is_valid() {
                        return Err(Error::InvalidIdempotencyKey);
                    }
                    Some(key.clone())
                }
                Some(key) => {
                    let form = planner.policy().idempotency_key_form;
                    let value = key
                        .header_value_in(form)
                        .ok_or(Error::InvalidIdempotencyKey)?;
                    req.headers_mut().insert(IDEMPOTENCY_KEY, value);
                    Some(key.clone())
                }
                None => None,
            },
        };
        let contract = Contract {
            retry_authorized: is_idempotent(req.method()) || key.is_some(),
            // A streaming body cannot be sent twice; known before any send.
            replayable: req.body().is_none_or(|b| b.as_bytes().is_some()),
        };
        let origin = origin_of(req.url());
        let route = Route::of(
            planner.policy(),
            &self.shared.scopes,
            &origin,
            req.method(),
            req.url().path(),
            extensions.get::<Scope>(),
            key.as_ref().map(IdempotencyKey::as_str),
        );
        let task = Task::new(
            planner,
            &self.store,
            &self.shared,
            origin,
            route,
            extensions.get::<Cost>().copied().unwrap_or_default(),
            deadline,
        );
        Ok((task, start, req, key, contract))
    }
}

/// The future `handle` returns.
type HandleFuture<'a> =
    Pin<Box<dyn Future<Output = reqwest_middleware::Result<Response>> + Send + 'a>>;

/// Written out, not with `#[async_trait]` (the signature is what it
/// expands to): the work before the first store call is synchronous, and
/// the boxed future is then the task's own, without a wrapper that would
/// keep a second copy of the request.
impl<S: Store> Middleware for RetryAfterMiddleware<S> {
    fn handle<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        req: Request,
        extensions: &'life1 mut Extensions,
        next: Next<'life2>,
    ) -> HandleFuture<'async_trait>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        match self.task(req, extensions) {
            Ok((task, start, req, key, contract)) => {
                Box::pin(task.run(Some(start), Some(req), key, contract, extensions, next))
            }
            Err(e) => Box::pin(std::future::ready(Err(e.into()))),
        }
    }
}
