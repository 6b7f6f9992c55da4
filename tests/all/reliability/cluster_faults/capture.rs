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
/// installed on: falling back to local state, and leases found taken by
/// another task (the heartbeat's).
#[derive(Clone, Default)]
pub(super) struct Warns {
    pub(super) fallback: Arc<AtomicUsize>,
    pub(super) lost: Arc<AtomicUsize>,
}

impl Warns {
    /// `(fallback, lost)` now.
    pub(super) fn now(&self) -> (usize, usize) {
        (
            self.fallback.load(Ordering::Relaxed),
            self.lost.load(Ordering::Relaxed),
        )
    }
}

/// An event's message.
#[cfg(feature = "tracing")]
struct Message(String);

#[cfg(feature = "tracing")]
impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

#[cfg(feature = "tracing")]
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warns {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() != tracing::Level::WARN
            || meta.target() != "reqwest_backpressure::redis_store"
        {
            return;
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        if message.0.contains("using local state") {
            self.fallback.fetch_add(1, Ordering::Relaxed);
        } else if message.0.contains("held by other tasks") {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Runs `f` on a two-thread runtime whose threads all report to `warns`.
pub(super) fn with_warns<T>(warns: &Warns, f: impl Future<Output = T>) -> T {
    #[cfg(feature = "tracing")]
    let dispatch = {
        use tracing_subscriber::layer::SubscriberExt;
        tracing::Dispatch::new(tracing_subscriber::registry().with(warns.clone()))
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
