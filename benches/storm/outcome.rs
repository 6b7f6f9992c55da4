//! What a row ended with: each task's outcome on the client's side, and the
//! row (client side, server side, limits hit) the report prints.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest_backpressure::RetryReport;

use crate::config::ClientKind;
use crate::server::{ServerState, Shape};

#[derive(Debug, Default)]
pub(crate) struct ClientSide {
    pub(crate) ok: u32,
    pub(crate) failed: u32,
    pub(crate) last_ok: Option<Duration>,
    /// Why tasks failed, by a short label.
    pub(crate) reasons: BTreeMap<String, u32>,
    /// `RetryReport::attempts` of successful tasks (ours only).
    pub(crate) attempts: BTreeMap<u32, u32>,
    /// When the first and the last failed task ended.
    pub(crate) failed_span: Option<(Duration, Duration)>,
}

impl ClientSide {
    pub(crate) fn failed_at(&mut self, at: Duration) {
        self.failed_span = Some(
            self.failed_span
                .map_or((at, at), |(lo, hi)| (lo.min(at), hi.max(at))),
        );
    }
}

pub(crate) struct Row {
    pub(crate) shape: Shape,
    pub(crate) client: ClientKind,
    pub(crate) n: u32,
    pub(crate) client_side: ClientSide,
    pub(crate) server: ServerState,
    /// `None` if the row finished; else the limit it hit.
    pub(crate) timed_out: Option<Duration>,
    /// Server epoch (first request) after the row's start.
    pub(crate) epoch_offset: Option<Duration>,
    /// Extra lines for the breakdown (the Redis row's workers).
    pub(crate) notes: Vec<String>,
}

pub(crate) fn failure_label(result: &reqwest_middleware::Result<reqwest::Response>) -> String {
    match result {
        Ok(r) => {
            let status = r.status().as_u16();
            match r.extensions().get::<RetryReport>() {
                Some(report) => match report.stop_reason() {
                    Some(reason) => format!("{status} ({})", reason.code()),
                    None => format!("{status}"),
                },
                None => format!("{status}"),
            }
        }
        Err(reqwest_middleware::Error::Middleware(e)) => {
            match e.downcast_ref::<reqwest_backpressure::Error>() {
                // Which store failure (its message names no address).
                Some(ours @ reqwest_backpressure::Error::Store(_)) => {
                    format!("error {} ({ours})", ours.code())
                }
                Some(ours) => format!("error {}", ours.code()),
                None => format!("middleware error: {e}"),
            }
        }
        Err(reqwest_middleware::Error::Reqwest(e)) => {
            let kind = if e.is_timeout() {
                "timeout"
            } else if e.is_connect() {
                "connect"
            } else {
                "request"
            };
            format!("transport error ({kind})")
        }
    }
}
