//! A `tracing` layer that keeps every event and span with all its fields,
//! at every level: what a real subscriber would be handed.

// The clean-logs tests read events, the span tests spans: with one feature
// of the two, part of this is unused.
#![allow(dead_code)]

use std::fmt::Debug;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use super::support::*;

/// One event or span, as the subscriber saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    /// The span's id, or `None` for an event.
    pub(super) span: Option<u64>,
    pub(super) level: String,
    pub(super) target: String,
    /// An event's message, a span's name.
    pub(super) name: String,
    /// Every field but `message`, in order, with its value.
    pub(super) fields: Vec<(String, String)>,
}

impl Seen {
    pub(super) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The layer; clones share what they saw.
#[derive(Debug, Clone, Default)]
pub(super) struct Capture(Arc<Mutex<Vec<Seen>>>);

impl Capture {
    pub(super) fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }

    pub(super) fn events(&self) -> Vec<Seen> {
        self.all()
            .into_iter()
            .filter(|s| s.span.is_none())
            .collect()
    }

    pub(super) fn spans(&self) -> Vec<Seen> {
        self.all()
            .into_iter()
            .filter(|s| s.span.is_some())
            .collect()
    }
}

struct Fields<'a> {
    message: &'a mut String,
    fields: &'a mut Vec<(String, String)>,
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.put(field, format!("{value:?}"));
    }
}

impl Fields<'_> {
    fn put(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            *self.message = value;
        } else {
            self.fields.push((field.name().to_owned(), value));
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        let mut seen = Seen {
            span: None,
            level: meta.level().to_string(),
            target: meta.target().to_owned(),
            name: String::new(),
            fields: Vec::new(),
        };
        event.record(&mut Fields {
            message: &mut seen.name,
            fields: &mut seen.fields,
        });
        self.0.lock().unwrap().push(seen);
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let meta = attrs.metadata();
        let mut seen = Seen {
            span: Some(id.into_u64()),
            level: meta.level().to_string(),
            target: meta.target().to_owned(),
            name: meta.name().to_owned(),
            fields: Vec::new(),
        };
        let mut message = String::new();
        attrs.record(&mut Fields {
            message: &mut message,
            fields: &mut seen.fields,
        });
        self.0.lock().unwrap().push(seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut all = self.0.lock().unwrap();
        // Ids are reused once a span closes: the latest span with it.
        if let Some(seen) = all.iter_mut().rev().find(|s| s.span == Some(id.into_u64())) {
            let mut message = String::new();
            values.record(&mut Fields {
                message: &mut message,
                fields: &mut seen.fields,
            });
        }
    }
}

/// Runs `f` on a paused current-thread runtime with `capture` (under a
/// registry) as the thread's subscriber, at every level.
pub(super) fn paused_captured<T>(capture: &Capture, f: impl std::future::Future<Output = T>) -> T {
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    tracing::subscriber::with_default(subscriber, || rt.block_on(f))
}
