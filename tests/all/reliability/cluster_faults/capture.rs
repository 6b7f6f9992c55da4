//! What the storm listens to: the observers' `on_local_state`, and the
//! Redis store's `warn` events on every runtime thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use reqwest_backpressure::observe::{LocalState, Observer};

/// `on_local_state` events, by operation.
#[derive(Default)]
pub(super) struct Locals(pub(super) Mutex<BTreeMap<&'static str, usize>>);

impl Observer for Locals {
    fn on_local_state(&self, local: &LocalState<'_>) {
        *self.0.lock().unwrap().entry(local.operation).or_default() += 1;
    }
}

/// `warn` events of the Redis store, counted on every thread they are
/// installed on.
#[cfg(feature = "tracing")]
#[derive(Clone, Default)]
struct Warns(Arc<AtomicUsize>);

#[cfg(feature = "tracing")]
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warns {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN
            && meta.target() == "reqwest_backpressure::redis_store"
        {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Runs `f` on a two-thread runtime whose threads all report to `warns`.
pub(super) fn with_warns<T>(warns: &Arc<AtomicUsize>, f: impl Future<Output = T>) -> T {
    #[cfg(feature = "tracing")]
    let dispatch = {
        use tracing_subscriber::layer::SubscriberExt;
        tracing::Dispatch::new(tracing_subscriber::registry().with(Warns(Arc::clone(warns))))
    };
    #[cfg(not(feature = "tracing"))]
    let _ = warns;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(2).enable_all();
    #[cfg(feature = "tracing")]
    {
        let dispatch = dispatch.clone();
        builder.on_thread_start(move || {
            // For the thread's life.
            std::mem::forget(tracing::dispatcher::set_default(&dispatch));
        });
    }
    let rt = builder.build().expect("a runtime");
    #[cfg(feature = "tracing")]
    return tracing::dispatcher::with_default(&dispatch, || rt.block_on(f));
    #[cfg(not(feature = "tracing"))]
    rt.block_on(f)
}
