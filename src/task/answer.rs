//! After a send: what the answer means for the task (a result, or when to
//! retry) and for its origin's shared state.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use reqwest::Response;
use tokio::time::Instant;

use super::Task;
use super::halt::Contract;
use super::log::log_decision;
use crate::http_origin::{origin_of, same_origin};
use crate::observe::WaitReason;
use crate::origin::{Outcome, OutputStatement, Statement};
use crate::planner::{Decision, Pushback};
use crate::ratelimit::RateLimitHint;
use crate::retry_after::{Hint, server_date};
use crate::scope::{Answer, Answered, Origin, Route, key};
use crate::store::Store;
use crate::store::steps;

/// What [`Task::settle`] makes of an answer: its outcome and the scope its
/// statement is of, or, for a pushback, its rate-limit headers and when it
/// was received (boxed: the success path's result stays small).
type Settled = Result<(Outcome, Option<String>), Box<(RateLimitHint, SystemTime, Duration)>>;

impl<S: Store> Task<'_, S> {
    /// Settles an answer that is not a pushback: the attempt is over, and
    /// what the origin's shared state learns from it. A pushback: what its
    /// rate-limit headers say, and when it was received (boxed: the
    /// success path's result stays small).
    pub(super) fn settle(&mut self, response: &Response, sent: Instant) -> Settled {
        let policy = self.planner.policy();
        // The clock is read only if a header or a pushback needs it.
        let mut received_at = None;
        let rate_limit = self.rate_limit(response, || {
            *received_at.get_or_insert_with(crate::util::wall_now)
        });
        if let Some(cap) = rate_limit.concurrency() {
            let origin = answered_by(&self.origin, response.url());
            let declared = policy.declared_in_flight(&origin);
            self.shared.in_flight.stated(&origin, cap, declared);
        }
        if policy.rate_limit_headers.leaky_bucket().is_some()
            && let Some((used, size)) = crate::ratelimit::stated_bucket(response.headers())
        {
            let origin = answered_by(&self.origin, response.url());
            self.shared.scopes.bucket_stated(&origin, used, size);
        }
        if policy.is_pushback_response(response.status(), &rate_limit, response.headers()) {
            return Err(Box::new((
                rate_limit,
                received_at.unwrap_or_else(crate::util::wall_now),
                sent.elapsed(),
            )));
        }
        self.planner.finish(&mut self.state);
        // The limit its statement is of: a scope's, or the origin's.
        let scope = self.answered_scopes(response).statement;
        let (limit, window) = (rate_limit.limit(), rate_limit.window());
        let tokens = self.cost_statement(&rate_limit);
        let outcome = match (rate_limit.remaining(), rate_limit.reset()) {
            (_, Some(reset_in)) if policy.proactive_gate && rate_limit.exhausted() => {
                Outcome::Exhausted {
                    reset_in,
                    limit,
                    window,
                    sent_ago: sent.elapsed(),
                    tokens,
                }
            }
            (Some(remaining), Some(reset_in)) if policy.proactive_gate => Outcome::Quota {
                remaining,
                reset_in,
                limit,
                window,
                sent_ago: sent.elapsed(),
                tokens,
            },
            _ => Outcome::Admitted,
        };
        Ok((outcome, scope))
    }

    /// What an answer's headers state of the origin's quota in cost units
    /// (an LLM API's tokens), with what this task declared of it.
    fn cost_statement(&self, rate_limit: &RateLimitHint) -> Option<Statement> {
        rate_limit.tokens().and_then(|t| {
            Some(Statement {
                remaining: t.remaining(),
                reset_in: t.reset()?,
                limit: t.limit(),
                bucket: t.is_bucket(),
                slack: t.slack(),
                input_only: t.counts_input_only(),
                spent: if t.counts_input_only() {
                    self.cost.input()
                } else {
                    self.cost.units()
                },
                output: rate_limit.output_tokens().and_then(|o| {
                    Some(OutputStatement {
                        remaining: o.remaining(),
                        reset_in: o.reset()?,
                        limit: o.limit()?,
                        slack: o.slack(),
                        spent: self.cost.output(),
                    })
                }),
            })
        })
    }

    /// Which limits of the task's origin an answer speaks for (see
    /// [`Route::answered`]): none but the origin's when no scope can apply
    /// or a redirect led to another origin.
    fn answered_scopes(&self, response: &Response) -> Answered {
        let policy = self.planner.policy();
        let scoping = policy.rate_limit_headers.scoping();
        let max = policy.scopes.max;
        if (self.route.is_none() && !scoping.ietf_partitions)
            || max == 0
            || !policy.origin_gate
            || !same_origin(&self.origin, response.url())
        {
            return Answered::default();
        }
        let scope = self.scope_key.as_deref().and_then(|k| key::split(k).1);
        let at = Origin {
            map: &self.shared.scopes,
            origin: &self.origin,
            scoping,
            max,
        };
        let answer = Answer {
            path: response.url().path(),
            status: response.status(),
            headers: response.headers(),
        };
        Route::answered(self.route.as_deref(), scope, &at, &answer)
    }

    /// Records a success: its statement on the limit it is of (`statement`,
    /// a scope's key, else the origin's), and on the other limits the
    /// request fell under that it got through.
    pub(super) async fn record_answer(
        &self,
        origin: Cow<'_, str>,
        statement: Option<String>,
        outcome: Outcome,
    ) {
        let mine = self.scope_key.as_deref();
        match statement {
            None => {
                if let Some(mine) = mine {
                    self.record(Cow::Borrowed(mine), Outcome::Admitted).await;
                }
                self.record(origin, outcome).await;
            }
            Some(scope) => {
                // The scope's statement first, the origin's answer last:
                // recording the origin's ends its first contact, and the
                // tasks that waited for it then ask the scope, which must
                // already know what its statement said.
                let key = key::limit_key(&self.origin, Some(&scope));
                let other = mine.filter(|mine| *mine != key.as_str());
                self.record(Cow::Owned(key), outcome).await;
                if let Some(mine) = other {
                    self.record(Cow::Borrowed(mine), Outcome::Admitted).await;
                }
                self.record(origin, Outcome::Admitted).await;
            }
        }
    }

    /// What to do with a pushback received at `received_at`: the task's
    /// result, or when to retry.
    pub(super) async fn pushed_back(
        &mut self,
        response: Response,
        rate_limit: RateLimitHint,
        received_at: SystemTime,
        sent_ago: Duration,
        attempt: u32,
        contract: Contract,
    ) -> Result<reqwest_middleware::Result<Response>, Instant> {
        let policy = self.planner.policy();
        let status = response.status();
        let answered = answered_by(&self.origin, response.url());
        let headers = response.headers();
        let server_now = server_date(headers).unwrap_or(received_at);
        let hint = match Hint::from_headers(headers) {
            // A vendor's documented format these headers read (Shopify's
            // `2.0`), as its upper bound.
            Hint::Invalid(invalid) => policy
                .rate_limit_headers
                .vendor_retry_after(headers, server_now)
                .map_or(Hint::Invalid(invalid), Hint::Delay),
            hint => hint,
        };
        let pushback = Pushback {
            retry_authorized: contract.retry_authorized,
            body_replayable: contract.replayable,
            server_said_do_not_retry: policy.rate_limit_headers.server_says_retry(headers)
                == Some(false),
            // The retry passes this origin's gate, not that of a
            // redirect's target.
            gated: matches!(answered, Cow::Borrowed(_)),
            ..Pushback::from_response(status, hint, server_now, received_at, rate_limit.retry_in())
        };
        self.retry_at = pushback.retry_at();
        let now = Instant::now();
        let mut decision = self
            .planner
            .plan(&mut self.state, &pushback, now, fastrand::u64(..));
        // The limit it pushes back for: its scope's, or the origin's (or a
        // redirect's target's).
        let scopes = self.answered_scopes(&response);
        let held = match scopes.pushback {
            Some(scope) => Cow::Owned(key::limit_key(&self.origin, Some(&scope))),
            None => Cow::Borrowed(&*answered),
        };
        let outcome = self.planner.origin_outcome(&pushback, &decision);
        match (scopes.other_limit, scopes.statement, outcome) {
            // Another limit than its resource's (GitHub's secondary one):
            // it holds the origin, which learns no rate from a penalty;
            // the resource, whose quota had units left, learns to spend
            // it in smaller bursts.
            (
                true,
                Some(scope),
                Outcome::Pushback {
                    retry_in: Some(d), ..
                },
            ) => {
                let resource = key::limit_key(&self.origin, Some(&scope));
                let held_by = |stated_here| Outcome::Held {
                    retry_in: d,
                    stated_here,
                };
                self.record(Cow::Borrowed(&*held), held_by(false)).await;
                self.record(Cow::Owned(resource), held_by(true)).await;
            }
            _ => {
                // What it stated of a cost quota first: a rejection that
                // quota explains is judged so.
                if let Some(tokens) = self.cost_statement(&rate_limit) {
                    let stated = Outcome::CostStated { sent_ago, tokens };
                    self.record(Cow::Borrowed(&*held), stated).await;
                }
                self.record(Cow::Borrowed(&*held), outcome).await;
            }
        }
        if self.planner.needs_budget(&pushback, &decision) {
            let budget = &policy.retry_budget;
            let granted = self.withdraw(budget).await;
            let token = matches!(granted, Ok(true));
            decision = self
                .planner
                .spend_budget(&mut self.state, decision, granted);
            if token {
                // Held until the retry is sent; a stop gives it back at
                // once (the permit dropped).
                let permit = self.permit.take().with_token(budget);
                if matches!(decision, Decision::Wait { .. }) {
                    self.permit = permit;
                }
            }
        }
        log_decision(&answered, &response, attempt, &hint, &self.state, &decision);
        match decision {
            Decision::Stop(reason) => Ok(self.finish(response, Some(reason))),
            Decision::Wait { until, source, .. } => {
                // Owned: the wait outlives this borrow of the task (a
                // pushback's cost, not the success path's).
                // The wait is for the limit the pushback held.
                let held = held.into_owned();
                self.waiting(Some(&held), WaitReason::Retry(source), until - now);
                // Keep the pushed-back response: if the retry cannot be
                // sent after all, the caller gets what the server said.
                self.last = Some(Box::new(response));
                Err(until)
            }
        }
    }

    /// What the response's rate-limit headers say, when the policy reads
    /// them and the answer could use them (a pushback, a status they
    /// declare, or any answer when the proactive gate is on).
    fn rate_limit(
        &self,
        response: &Response,
        received_at: impl FnOnce() -> SystemTime,
    ) -> RateLimitHint {
        let policy = self.planner.policy();
        let headers = &policy.rate_limit_headers;
        let status = response.status();
        let useful = (policy.proactive_gate && policy.origin_gate)
            || policy.is_retry_status(status)
            || headers.pushback_statuses().contains(&status);
        if !useful || headers.is_empty() {
            return RateLimitHint::default();
        }
        headers.read_with(response.headers(), || {
            server_date(response.headers()).unwrap_or_else(received_at)
        })
    }

    /// Records what `origin` answered. A store that cannot record it (in
    /// time) costs the shared view one observation, never the caller's
    /// response. (The success path boxes this future: the outcome is
    /// large.)
    pub(super) async fn record(&self, origin: Cow<'_, str>, outcome: Outcome) {
        let origin = &*origin;
        let pacing = crate::scope::pacing_config(
            self.planner.policy(),
            &self.shared.scopes,
            origin,
            self.under_global(),
        );
        let Some(record) = steps::record(&**self.store, origin, pacing, outcome) else {
            return;
        };
        let before = self.fallbacks_now();
        let result = self.bounded_raw(record).await;
        self.shared.answered();
        self.local_state(origin, "record", before, false);
        if let Some(Ok(Some(closed))) = &result {
            self.gate_closed(origin, *closed);
        }
        #[cfg(feature = "tracing")]
        if !matches!(result, Some(Ok(_))) {
            tracing::warn!(
                target: "reqwest_backpressure::task",
                origin,
                "reqwest-backpressure: could not record an answer in the store"
            );
        }
        #[cfg(not(feature = "tracing"))]
        let _ = result;
    }
}

/// The origin that answered `url`: the request's own `origin` unless a
/// redirect led elsewhere (built only then).
pub(super) fn answered_by<'o>(origin: &'o str, url: &reqwest::Url) -> Cow<'o, str> {
    if same_origin(origin, url) {
        Cow::Borrowed(origin)
    } else {
        Cow::Owned(origin_of(url))
    }
}
