//! What a task tells: the observer's events, and the caller's
//! [`RetryReport`] when it ends.

use std::time::SystemTime;

use reqwest::Response;
use tokio::time::Instant;

use super::Task;
use super::halt::Halt;
use crate::extensions::RetryReport;
use crate::observe::{self, WaitReason, wall_in};
use crate::planner::StopReason;
use crate::scope::key::split;
use crate::store::Store;

impl<S: Store> Task<'_, S> {
    /// Tells the observer that the wait it was told of ended (`dropped`:
    /// the task's future was dropped during it).
    pub(super) fn end_wait(&mut self, dropped: bool) {
        if let (Some(o), Some(pending)) = (self.observer(), self.pending_wait.take()) {
            let (key, reason) = *pending;
            let (origin, scope) = split(&key);
            o.on_wait_end(&observe::WaitEnd {
                origin,
                scope,
                reason,
                dropped,
            });
        }
    }

    /// The store's count of operations run on local state, to compare after
    /// a call (0 without an observer: nothing to tell).
    pub(super) fn fallbacks_now(&self) -> u64 {
        match self.observer() {
            Some(_) => self.store.local_fallbacks(),
            None => 0,
        }
    }

    /// Tells the observer that the store ran `operation` for the limit
    /// `key` (or the origin's lease) on this process's own state, if its
    /// count rose past `before` (or `ran_locally`).
    pub(super) fn local_state(
        &self,
        key: &str,
        operation: &'static str,
        before: u64,
        ran_locally: bool,
    ) {
        if let Some(o) = self.observer()
            && (ran_locally || self.store.local_fallbacks() > before)
        {
            let (origin, scope) = split(key);
            o.on_local_state(&observe::LocalState {
                origin,
                scope,
                operation,
            });
        }
    }

    /// Tells the observer that the gate of the limit `key` closed for `d`.
    pub(super) fn gate_closed(&self, key: &str, d: std::time::Duration) {
        if let Some(o) = self.observer() {
            let (origin, scope) = split(key);
            o.on_gate_closed(&observe::GateClosed {
                origin,
                scope,
                duration: d,
                until_wall: wall_in(d),
            });
        }
    }

    /// Tells the observer that the task waits `d` for `reason`, for the
    /// limit that `answered` (its key; without one, its origin's own).
    pub(super) fn waiting(
        &mut self,
        answered: Option<&str>,
        reason: WaitReason,
        d: std::time::Duration,
    ) {
        let Some(o) = self.observer() else {
            return;
        };
        let key = answered.unwrap_or(&self.origin);
        let (origin, scope) = split(key);
        let now = Instant::now();
        o.on_wait(&observe::Wait {
            origin,
            scope,
            attempt: self.state.attempts() + 1,
            reason,
            duration: d,
            until: now.checked_add(d).unwrap_or(now),
            until_wall: wall_in(d),
        });
        self.pending_wait = Some(Box::new((key.to_owned(), reason)));
    }

    /// Tells the observer that the task stopped with `code`.
    pub(super) fn stopped(&self, code: &'static str) {
        if let Some(o) = self.observer() {
            o.on_stop(&observe::Stop {
                origin: &self.origin,
                attempts: self.state.attempts(),
                code,
            });
        }
    }

    /// Ends the task before a send: with the last pushback and the halt's
    /// stop code, or, if nothing was answered yet, with the halt's error.
    pub(super) fn halt(mut self, halt: Halt) -> reqwest_middleware::Result<Response> {
        match self.last.take() {
            Some(response) => {
                let retry_at = self.retry_at;
                let reason = halt.reason();
                self.stopped(reason.code());
                Ok(self.report(*response, Some(reason), retry_at))
            }
            None => {
                let error = halt.into_error();
                self.stopped(error.code());
                Err(error.into())
            }
        }
    }

    /// Ends the task with `response`.
    pub(super) fn finish(
        &self,
        response: Response,
        stop_reason: Option<StopReason>,
    ) -> reqwest_middleware::Result<Response> {
        if let Some(reason) = stop_reason {
            self.stopped(reason.code());
        }
        Ok(self.report(response, stop_reason, stop_reason.and(self.retry_at)))
    }

    pub(super) fn report(
        &self,
        mut response: Response,
        stop_reason: Option<StopReason>,
        retry_at: Option<SystemTime>,
    ) -> Response {
        response.extensions_mut().insert(RetryReport {
            attempts: self.state.attempts(),
            waited: self.state.waited(),
            stop_reason,
            retry_at,
            hint_source: self.state.hint_source(),
        });
        response
    }
}
