//! Before a send: the key's lease, and the wait until every limit the
//! task falls under admits it (each limit is asked in `ask.rs`).

use reqwest::Request;
use tokio::time::Instant;

use super::Task;
use super::ask::Step;
use super::halt::{Halt, LeaseGuard};
use crate::error::Error;
use crate::extensions::IdempotencyKey;
use crate::planner::StopReason;
use crate::scope::Route;
use crate::store::Store;
use crate::store::steps;

impl<'a, S: Store> Task<'a, S> {
    /// Takes the lease of `key` (scoped to the origin, so one key against
    /// two APIs does not collide).
    pub(super) async fn acquire(&self, key: IdempotencyKey) -> Result<LeaseGuard<'a, S>, Error> {
        let lease_key = format!("{} {}", self.origin, key.as_str());
        let ttl = self
            .state
            .deadline()
            .saturating_duration_since(Instant::now());
        let before = self.fallbacks_now();
        match self.bounded_raw(self.store.acquire(&lease_key, ttl)).await {
            Some(Ok(Some(token))) => {
                self.local_state(&self.origin, "lease", before, false);
                Ok(LeaseGuard {
                    store: self.store,
                    key: Some(lease_key),
                    token,
                })
            }
            Some(Ok(None)) => Err(Error::AlreadyActive),
            Some(Err(e)) => Err(Error::Store(e)),
            None => Err(Error::DeadlineExhausted),
        }
    }

    /// Waits until every limit the task falls under admits it (its
    /// scope's, then its origin's: each gate open and each paced slot
    /// come), within the planner's
    /// [admission limit](crate::planner::Planner::admission_limit). The task's first send
    /// deposits into the retry budget, once however often it asks.
    ///
    /// A limit that makes the task wait makes it ask every limit again
    /// after: what the others granted meanwhile is given back first, so the
    /// task leaves only at a moment every limit admits it.
    ///
    /// `now`, if given, is a clock reading taken just before (the
    /// middleware's): it is used instead of reading the clock again, and
    /// returned as the time of admission when the store answered at once.
    /// Otherwise the time of admission is read when it comes.
    ///
    /// `request` is the task's request, while it has it: a task that met
    /// no scope when it began (its origin's partitions were not known yet)
    /// finds its scope once an answer taught one, at its next ask.
    pub(super) async fn admit(
        &mut self,
        now: Option<Instant>,
        request: Option<&Request>,
    ) -> Result<Instant, Halt> {
        let policy = self.planner.policy();
        let mut now = now;
        if self.state.attempts() == 0
            && let Some(deposit) = steps::deposit(&**self.store, &policy.retry_budget)
        {
            let (deposited, at_once) = self.bounded_ready(deposit).await;
            deposited
                .ok_or(Halt::Stop(StopReason::DeadlineExhausted))?
                .map_err(Halt::Store)?;
            if !at_once {
                now = None;
            }
        }
        self.learn_route(request);
        if self.route.is_none() {
            // The origin's limit alone.
            loop {
                let admit = Box::pin(self.admit_limit(false, now.take(), None));
                match admit.await? {
                    Step::Go(at) | Step::Confirmed(at) => return Ok(at),
                    Step::Again | Step::FirstAnswer => {}
                }
                if self.learn_route(request) {
                    break;
                }
            }
        }
        // Boxed: most tasks have no scope, and their futures stay small.
        let scoped = Box::pin(self.admit_scoped(now));
        scoped.await
    }

    /// Gives a task without a route the one its request has now, if an
    /// answer since taught its origin's partitions; whether it has one now.
    fn learn_route(&mut self, request: Option<&Request>) -> bool {
        if self.route.is_some() {
            return true;
        }
        let Some(request) = request else {
            return false;
        };
        if !self.shared.scopes.learned_any() {
            return false;
        }
        self.route = Route::of(
            self.planner.policy(),
            &self.shared.scopes,
            &self.origin,
            request.method(),
            request.url().path(),
            None,
            None,
        );
        self.route.is_some()
    }

    /// [`admit`](Self::admit) for a task that may fall under a scope.
    async fn admit_scoped(&mut self, now: Option<Instant>) -> Result<Instant, Halt> {
        let mut now = now;
        // Which limit's slot came and was confirmed in this pass (`true`:
        // the scope's): it is not asked again.
        let mut confirmed: Option<bool> = None;
        loop {
            if self.rescope() {
                confirmed = None;
            }
            let mut admitted = None;
            let mut again = false;
            // Whether a limit was asked in this pass yet.
            let mut asked = false;
            // The scope first: it holds most often (a bucket or resource
            // spent), and what it granted goes back whole when the origin
            // makes the task wait (a unit, cost units). The origin, asked
            // last, admits the task right before it leaves: a paced slot of
            // the origin (a declared global quota) is never taken by a task
            // that then waits for its scope.
            for scoped in [true, false] {
                if scoped && self.scope_key.is_none() {
                    continue;
                }
                if confirmed == Some(scoped) {
                    continue;
                }
                let first = !asked;
                asked = true;
                // The limit asked first admitted the task a round trip
                // ago: its gate is read again beside this ask.
                let reread = match (first, scoped) {
                    (false, false) => self.scope_key.clone(),
                    (false, true) => Some(self.origin.clone()),
                    _ => None,
                };
                match self.admit_limit(scoped, now.take(), reread).await? {
                    Step::Go(at) => admitted = Some(at),
                    Step::Confirmed(at) => {
                        confirmed = Some(scoped);
                        admitted = Some(at);
                        // The limits asked before it gave back what they
                        // granted when the task began its wait.
                        if !first {
                            again = true;
                            break;
                        }
                    }
                    Step::Again => {
                        confirmed = None;
                        again = true;
                        break;
                    }
                    Step::FirstAnswer => {
                        // The scope asked before keeps its grant (its own
                        // first contact, perhaps): only this one is asked
                        // again.
                        if !first {
                            confirmed = Some(!scoped);
                        }
                        again = true;
                        break;
                    }
                }
            }
            if !again {
                if self.rescope() {
                    // An answer taught the task's scope while its limits
                    // were asked (the scope may be spent): it asks the
                    // scope too, and what it was granted to send at once
                    // goes back first.
                    self.permit.give_back_spent();
                    continue;
                }
                return Ok(admitted.unwrap_or_else(Instant::now));
            }
        }
    }
}
