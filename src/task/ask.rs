//! Asking one limit to admit a task (the origin's, or its scope's), and
//! the waits its answer asks for: a closed gate, a paced slot, a queue
//! ahead, the first answer.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::Task;
use super::halt::Halt;
use super::permit::Permit;
use crate::observe::{self, WaitReason};
use crate::origin::tuning::TUNING;
use crate::origin::{Admission, Within};
use crate::planner::HintSource;
use crate::planner::StopReason;
use crate::store::Store;
use crate::store::steps::{self, Admitted, Slot};

impl<S: Store> Task<'_, S> {
    /// Waits `d` for the gate of the limit `held` (`None`: the origin's),
    /// never past what the task accepts (else it is refused).
    pub(super) async fn wait_closed(
        &mut self,
        held: Option<&str>,
        d: Duration,
    ) -> Result<(), Halt> {
        let at = Instant::now();
        let limit = self.planner.admission_limit(&self.state, at);
        if ends_past(at, d, at.checked_add(limit.latest)) {
            return Err(self.refused(limit.reason, d));
        }
        self.waiting(held, WaitReason::Gate, d);
        let slept = Instant::now();
        let sleep = Box::pin(tokio::time::sleep(d));
        sleep.await;
        self.end_wait(false);
        self.state.add_wait(slept.elapsed());
        Ok(())
    }

    /// How long from now the gate of the limit `key` stays closed, read
    /// from the store.
    async fn closed_for(&self, key: &str) -> Result<Option<Duration>, crate::store::StoreError> {
        let (state, now) = self.store.read_origin(key).await?;
        Ok(state.and_then(|s| s.closed_for(now)))
    }

    /// Asks one limit (the origin's, or with `scoped` the scope's) to
    /// admit the task, and waits as it answers.
    ///
    /// With `reread`, the key of a limit that admitted the task a round
    /// trip ago, that limit's gate is read again beside the ask (at once:
    /// one round trip): a pushback recorded since may have closed it, and
    /// the task then gives back what this limit granted, and waits.
    pub(super) async fn admit_limit(
        &mut self,
        scoped: bool,
        now: Option<Instant>,
        reread: Option<String>,
    ) -> Result<Step, Halt> {
        let policy = self.planner.policy();
        let key = match (scoped, &self.scope_key) {
            (true, Some(scope)) => scope.clone(),
            _ => self.origin.clone(),
        };
        let key = key.as_str();
        let asked = now.unwrap_or_else(Instant::now);
        let limit = self.planner.admission_limit(&self.state, asked);
        let pacing =
            crate::scope::pacing_config(policy, &self.shared.scopes, key, self.under_global());
        let within = Within {
            server: limit.latest,
            declared: limit.declared,
        };
        // On a store whose calls may wait, the call is owned from the
        // moment it is issued: dropped unanswered (the task dropped,
        // its deadline passed), what it reserved is given back.
        let (admitted, at_once) = if self.store.answers_at_once() {
            let Some(admit) =
                steps::admit(&**self.store, key, pacing, within, (self.cost, self.waited))
            else {
                return Ok(Step::Go(asked));
            };
            self.bounded_ready(admit).await
        } else {
            let Some(admit) = self.admit_owned(key, pacing, within) else {
                return Ok(Step::Go(asked));
            };
            match reread {
                None => {
                    // Boxed: the task's future keeps a pointer (this
                    // store's calls cost a round trip, not an
                    // allocation's time).
                    let bounded = Box::pin(self.bounded_ready(admit));
                    bounded.await
                }
                Some(other) => {
                    // The answer is held by a permit from the moment it
                    // comes: if the read is still on its way when the
                    // task is dropped or its deadline passes, what the
                    // answer reserved goes back with it.
                    let store = self.store;
                    let held = async move {
                        let admitted = admit.await?;
                        let permit = Permit::new(store).with_admitted(key, &admitted);
                        Ok::<_, crate::store::StoreError>((admitted, permit))
                    };
                    let both = crate::util::join2(held, self.closed_for(&other));
                    let bounded = Box::pin(self.bounded_ready(both));
                    let (answers, at_once) = bounded.await;
                    let Some((held, closed)) = answers else {
                        return Err(Halt::Stop(StopReason::DeadlineExhausted));
                    };
                    if let Ok(Some(d)) = closed {
                        // What this limit granted goes back with its
                        // permit, dropped here.
                        drop(held);
                        self.permit.give_back_spent();
                        self.wait_closed(Some(&other), d).await?;
                        return Ok(Step::Again);
                    }
                    let admitted = held.map(|(admitted, permit)| {
                        // Taken over below (the slot, what was spent).
                        permit.hand_over();
                        admitted
                    });
                    (Some(admitted), at_once)
                }
            }
        };
        let Admitted {
            admission,
            spent,
            on_fallback,
        } = admitted
            .ok_or(Halt::Stop(StopReason::DeadlineExhausted))?
            .map_err(Halt::Store)?;
        // What a send at once spent is the permit's until it leaves: a
        // task that stops first gives it back.
        if let Some(spent) = spent {
            self.permit = (self.permit.take()).with_spent(key, spent, on_fallback);
        }
        if on_fallback {
            self.local_state(key, "admission", 0, true);
        }
        // When the store answered: its waits count from then, never
        // from when it was asked (on a store whose calls take a round
        // trip, the time it names may count from any moment between).
        let admitted = || if at_once { asked } else { Instant::now() };
        // No wait ends after this: the deadline less the send reserve,
        // or the wait budgets (the store's waits are within it, from
        // when it was asked).
        let by = asked.checked_add(limit.latest);
        // A queue ahead may be a declared quota's, which the task waits
        // for as its deadline allows (never past it). No wait that ends
        // later is begun: the origin cannot take the task in time.
        let by_declared = asked.checked_add(limit.declared);
        // A task pushed back with no time goes to the back: it waits at
        // the gate a little longer than the tasks there, so the next
        // probe and the first slots after it are others' (the same task
        // would otherwise probe each time, for the whole queue, and
        // meet every overshoot of a pace still learning).
        let wait = match admission {
            Admission::Now => return Ok(Step::Go(admitted())),
            Admission::Reopened => {
                if let Some(o) = self.observer() {
                    let (origin, scope) = crate::scope::key::split(key);
                    o.on_gate_reopened(&observe::GateReopened { origin, scope });
                }
                return Ok(Step::Go(admitted()));
            }
            Admission::Refused { free_in } => {
                return Err(self.refused(limit.reason, free_in));
            }
            Admission::QuotaHeld(d) => {
                self.gate_closed(key, d);
                self.waiting(Some(key), WaitReason::Gate, d);
                d
            }
            Admission::GateClosed(d) => {
                // Pushed back with no time at all: the gate's hold is
                // ours, and so is the probe after it. The more attempts
                // a task has spent, the further back it waits: the
                // probes of a long outage are the tasks with attempts
                // to spare, not one task until its attempts run out.
                // A task with one attempt left waits behind the whole
                // queue, past the tasks that a pace still in slow start
                // told to come back later (`QueueAhead`): spent on a
                // probe the origin rejects, its last attempt would lose
                // the request. Never past what the task accepts: the
                // wait behind the queue is trimmed to it (the retry at
                // the gate's reopening is still possible), never the
                // gate's own time.
                let d = if self.state.hint_source() == Some(HintSource::Gate) {
                    let attempts = self.state.attempts();
                    let behind = TUNING.probe_gap_max * attempts.max(1);
                    let last = attempts.saturating_add(1) >= policy.max_attempts;
                    let behind = if last {
                        behind.saturating_add(TUNING.slow_start_ahead)
                    } else {
                        behind
                    };
                    trimmed(d, d.saturating_add(behind), by)
                } else {
                    d
                };
                self.waiting(Some(key), WaitReason::Gate, d);
                d
            }
            Admission::FirstAnswer(d) | Admission::FirstWave(d) => {
                // Until an answer is recorded in this process, or `d`
                // (another process may have sent the first, or some of
                // the wave). What the limits asked before granted is
                // kept: the wait is short, and bounded, and a scope's
                // grant may be its own first contact, which no other
                // task would take meanwhile. A task that waited for a
                // first answer leaves in the wave its answer releases.
                if matches!(admission, Admission::FirstAnswer(_)) {
                    self.waited = true;
                }
                let d = trimmed(Duration::ZERO, d, by);
                self.waiting(Some(key), WaitReason::FirstAnswer, d);
                let slept = Instant::now();
                let woken = Box::pin(self.shared.first_answer(d));
                woken.await;
                self.end_wait(false);
                self.state.add_wait(slept.elapsed());
                return Ok(Step::FirstAnswer);
            }
            Admission::QueueAhead(d) => {
                // Only "ask again then": asked sooner, the store
                // answers anew within what is left.
                let d = trimmed(Duration::ZERO, d, by_declared);
                self.waiting(Some(key), WaitReason::Pace, d);
                d
            }
            Admission::SlotReserved(d, reservation) => {
                // Given back unless the slot is confirmed: the task may
                // be dropped, or stop, while it waits.
                let slot = Slot {
                    reservation,
                    on_fallback,
                };
                // What other limits granted is given back: the task
                // asks them again once its slot has come.
                self.permit.give_back_spent();
                let permit = self.permit.take().with_slot(key, slot);
                if ends_past(admitted(), d, by_declared) {
                    // The slot goes back with the permit.
                    return Err(self.refused(StopReason::DeadlineExhausted, d));
                }
                self.waiting(Some(key), WaitReason::Pace, d);
                let slept = Instant::now();
                let sleep = Box::pin(tokio::time::sleep(d));
                sleep.await;
                self.end_wait(false);
                self.state.add_wait(slept.elapsed());
                // A probe rejected while we slept closed the gate again:
                // queue anew instead of following it into the rejection
                // (the store then takes the slot back).
                // Until the store answers, the slot is still the
                // permit's to give back.
                let confirm = Box::pin(permit.confirm());
                let (permit, gate) = self
                    .bounded_raw(confirm)
                    .await
                    .ok_or(Halt::Stop(StopReason::DeadlineExhausted))?
                    .map_err(Halt::Store)?;
                self.permit = permit;
                if gate.is_none() {
                    return Ok(Step::Confirmed(Instant::now()));
                }
                return Ok(Step::Again);
            }
        };
        if ends_past(admitted(), wait, by_declared) {
            self.end_wait(false);
            return Err(self.refused(StopReason::DeadlineExhausted, wait));
        }
        self.permit.give_back_spent();
        // Measured from after the store's answer, never early.
        let slept = Instant::now();
        let sleep = Box::pin(tokio::time::sleep(wait));
        sleep.await;
        self.end_wait(false);
        self.state.add_wait(slept.elapsed());
        Ok(Step::Again)
    }
}

/// What one limit answered a task asking to send.
pub(super) enum Step {
    /// It admits the task now (the time of admission).
    Go(Instant),
    /// Its slot came, and is confirmed: it admits the task now.
    Confirmed(Instant),
    /// The task waited for it: every limit is asked again.
    Again,
    /// The task waited for its first answer: it is asked again, and the
    /// limits asked before keep what they granted.
    FirstAnswer,
}

impl<S: Store> Task<'_, S> {
    /// The origin cannot take the task within `reason`'s limit: it can in
    /// `free_in`, which the caller is told (never earlier than the
    /// server's time, and a caller who reschedules then does not rejoin
    /// the same queue).
    pub(super) fn refused(&mut self, reason: StopReason, free_in: Duration) -> Halt {
        let retry_at: Option<SystemTime> = crate::util::wall_now().checked_add(free_in);
        self.retry_at = self.retry_at.max(retry_at);
        Halt::Refused { reason, retry_at }
    }
}

/// Whether a wait of `d` from `from` ends past `by` (`None`: beyond any
/// clock). A store whose calls take a round trip admits a wait within the
/// limit from its own time, read on the way; counted from its answer, as
/// it must be, the wait can end up to a round trip later.
fn ends_past(from: Instant, d: Duration, by: Option<Instant>) -> bool {
    by.is_some_and(|by| from.checked_add(d).is_none_or(|end| end > by))
}

/// A wait of `wanted` from now, trimmed to end by `by` (`None`: beyond any
/// clock), but never shorter than `floor`: the server's time (a gate's or
/// a stated quota's), which no wait ends before.
fn trimmed(floor: Duration, wanted: Duration, by: Option<Instant>) -> Duration {
    let room = by.map_or(wanted, |by| by.saturating_duration_since(Instant::now()));
    wanted.min(room).max(floor)
}
