//! What an origin's answers do to its parts: a success feeds the period
//! and the pace, a stated quota the quota, a pushback or a spent quota the
//! gate (closed until the server's time, or, without one, for a hold of
//! our own).

use std::time::Duration;

use super::gate::Closing;
use super::stated::{Size, StatedReset};
use super::{OriginState, Outcome, PacingConfig};

/// A stated quota's size, when the answer gave one.
fn size(limit: Option<u64>, window: Option<Duration>) -> Option<Size> {
    limit.filter(|&l| l > 0).map(|limit| Size { limit, window })
}

impl OriginState {
    /// A 2xx (or any non-pushback) answer arrived at `now`.
    pub fn on_success(&mut self, now: Duration) {
        self.first.heard(now);
        self.succeeded(now);
    }

    /// [`on_success`](Self::on_success), the answer already heard by the
    /// first contact.
    fn succeeded(&mut self, now: Duration) {
        self.last_seen = now;
        self.recent.admitted();
        let measuring = !self.pace.is_paced() && !self.gate.reopen_pending;
        self.period.on_success(now, measuring);
        self.pace.on_success(now, self.gate.reopen_pending);
    }

    /// [`on_success`](Self::on_success) under `cfg`: a pace raised by it
    /// stays within the declared quota (a slot given back or used measures
    /// the queue at the pace's rate before the next admission bounds it).
    fn on_success_under(&mut self, cfg: PacingConfig, now: Duration) {
        self.succeeded(now);
        if let Some(quota) = cfg.declared {
            self.pace.keep_within(quota);
        }
    }

    /// Applies what the origin answered at `now`. When this answer closed
    /// an origin that was open (its gate, or its spent quota), how long
    /// from `now` it stays closed.
    pub fn observe(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        outcome: Outcome,
    ) -> Option<Duration> {
        self.observe_late(cfg, now, Duration::ZERO, outcome)
    }

    /// [`observe`](Self::observe) for an answer received `late` before
    /// `now`: its times (`retry_in`, `reset_in`) count from then, not from
    /// when it is applied. A shared store applies an answer after a round
    /// trip or more; a gate set from the time of application would close
    /// later than the server said, and an answer applied after its own
    /// time had passed would close a reopened gate again for a whole
    /// period.
    pub(crate) fn observe_late(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        late: Duration,
        outcome: Outcome,
    ) -> Option<Duration> {
        let was_open = self.gate_in(now).is_none();
        let answered = now.saturating_sub(late);
        self.first.heard(now);
        match outcome {
            Outcome::Admitted => self.on_success_under(cfg, now),
            Outcome::Pushback {
                retry_in,
                hold_at_least,
            } => {
                // A limit whose first event is a pushback (a scope an
                // answer named) holds for its declared pace's own hold,
                // as one that admitted a request first would.
                if let Some(declared) = cfg.declared
                    && !self.pace.is_paced()
                {
                    self.pace.bound(now, declared);
                }
                // A time too large to add is an enormous time: the gate
                // closes for its cap, it is not a pushback without a time.
                self.reject(
                    cfg,
                    now,
                    answered,
                    retry_in.map(|d| answered.saturating_add(d)),
                    hold_at_least,
                );
            }
            Outcome::Held {
                retry_in,
                stated_here: false,
            } => {
                self.last_seen = now;
                if cfg.gate {
                    // Closed until the server's time; a reopening already
                    // pending still learns from its own period, but this
                    // hold starts none.
                    let pending = self.gate.reopen_pending;
                    self.gate.close(
                        cfg.max_gate,
                        now,
                        answered,
                        answered.saturating_add(retry_in),
                    );
                    self.gate.reopen_pending = pending;
                }
            }
            Outcome::Held {
                retry_in,
                stated_here: true,
            } => {
                self.recent.rejected();
                // The server counted the request against the other limit
                // only: its unit of this quota comes back (unless the
                // server stated the quota spent).
                if self.quota.renews() {
                    self.quota.refund(now);
                }
                if cfg.gate {
                    self.period.rejected = true;
                    self.period.other_limit = true;
                }
                self.hold(cfg, now, answered, Some(answered.saturating_add(retry_in)));
            }
            Outcome::CostStated { sent_ago, tokens } => {
                // (A bucket's statement, the output tokens' among them, is
                // left to its successes': see `Tokens::on_rejected`.)
                let sent = answered.saturating_sub(sent_ago);
                self.tokens.on_rejected(now, sent, tokens);
            }
            Outcome::Exhausted {
                reset_in,
                limit,
                window,
                sent_ago,
                tokens,
            } => {
                let sent = answered.saturating_sub(sent_ago);
                if let Some(st) = tokens {
                    self.tokens.on_stated(now, sent, st);
                    if let Some(output) = st.output {
                        self.output.on_stated(now, sent, output.into());
                    }
                }
                // The window measured from the send: a limiter that opens
                // its window at a request's arrival states at most this.
                let reset_at = answered.saturating_add(reset_in);
                self.quota
                    .sized(reset_at.saturating_sub(sent), size(limit, window));
                self.exhausted(cfg, now, answered, sent, reset_in);
            }
            Outcome::Quota {
                remaining,
                reset_in,
                limit,
                window,
                sent_ago,
                tokens,
            } => {
                self.on_success_under(cfg, now);
                self.period.stated = true;
                let sent = answered.saturating_sub(sent_ago);
                if let Some(st) = tokens {
                    self.tokens.on_stated(now, sent, st);
                    if let Some(output) = st.output {
                        self.output.on_stated(now, sent, output.into());
                    }
                }
                if self.quota.on_stated(
                    now,
                    sent,
                    remaining,
                    now.saturating_add(reset_in),
                    size(limit, window),
                ) {
                    self.quota.spent(now, cfg.max_gate);
                    self.quota_spent();
                }
            }
        }
        if was_open { self.gate_in(now) } else { None }
    }

    /// A success that said the quota is exhausted until `reset_in` after
    /// `answered`: the gate closes until then (capped), before any `429`.
    fn exhausted(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        answered: Duration,
        sent: Duration,
        reset_in: Duration,
    ) {
        self.on_success_under(cfg, now);
        self.period.stated = true;
        let stated = StatedReset {
            at: answered.saturating_add(reset_in),
            from_send: sent.saturating_add(reset_in),
            reset_in,
        };
        if self.quota.earlier_window(sent, stated) {
            // An earlier window's last answer.
            return;
        }
        if self.quota.renews() {
            // A quota of known size governs the origin: spent until its
            // reset, which renews it, with no gate to reopen or pace to
            // learn (nothing was rejected). Of two answers stating the
            // same window's reset, the earlier bounds it more closely
            // (servers round theirs up): a later one would drift each
            // window's start.
            let reset = self.quota.closest_reset(now, stated);
            let capped = StatedReset {
                at: reset.min(answered.saturating_add(cfg.max_gate)),
                ..stated
            };
            if cfg.gate && self.quota.on_exhausted(sent, capped) {
                self.quota.spent(answered, cfg.max_gate);
                self.quota_spent();
            }
            return;
        }
        // Servers round their reset up to whole seconds: of two answers
        // stating the same window's reset, the earlier bounds it more
        // closely. A spent quota tells no task to wait (it is not a
        // pushback), so the earlier one holds.
        let reset = self.quota.closest_reset(now, stated);
        self.hold(cfg, now, answered, Some(reset));
        // The quota is spent until then. Known here even where the answers
        // that stated it were not (a shared store keeps only the spent
        // one): batches are then not booked ahead of the reset, where they
        // would be lost. (An answer of an earlier window leaves a later
        // one's quota alone.)
        let capped = StatedReset {
            at: reset.min(answered.saturating_add(cfg.max_gate)),
            ..stated
        };
        if cfg.gate && self.quota.on_exhausted(sent, capped) {
            self.quota.spent(answered, cfg.max_gate);
            self.quota_spent();
        }
    }

    /// A pushback arrived at `now`; `retry_at` is the server's time when it
    /// gave a valid one. Closes the gate until then, at most
    /// [`max_gate`](PacingConfig::max_gate) (keeping a later time already
    /// set), and cuts the pace.
    pub fn on_pushback(&mut self, cfg: PacingConfig, now: Duration, retry_at: Option<Duration>) {
        self.first.heard(now);
        self.reject(cfg, now, now, retry_at, None);
    }

    /// [`on_pushback`](Self::on_pushback) for a pushback the origin answered
    /// at `answered`, applied at `now` (see [`hold`](Self::hold)); the
    /// gate holds at least `hold_at_least` from the answer (see
    /// [`Outcome::Pushback`]).
    fn reject(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        answered: Duration,
        retry_at: Option<Duration>,
        hold_at_least: Option<Duration>,
    ) {
        self.recent.rejected();
        let explained = self.tokens.explains_rejection(now);
        // A rejection naming a time, even in a format we do not read as
        // the server's, is the origin's throttle, not one request's.
        let isolated =
            retry_at.is_none() && hold_at_least.is_none() && !explained && self.isolated(cfg, now);
        // A rejection the stated cost quota explains (an LLM API's tokens
        // spent) holds the origin like a spent quota: it says nothing of
        // the rate the origin admits in requests. Nor does one isolated
        // among successes.
        if cfg.gate && !explained && !isolated {
            self.period.rejected = true;
        }
        // A rejected request was not admitted: a server stating its quota
        // counts what it admits (GitHub's secondary limit spends nothing of
        // the primary quota), so the unit its admission spent comes back.
        // Where the server counted it after all, its next statement of the
        // window, the smaller count, corrects this. A spent quota gets no
        // unit back: it holds the origin until the reset the server stated
        // (the rejection is likely that quota's own, GitHub's `403` with
        // remaining 0), and a unit back would let a request leave before it.
        if self.quota.renews() && self.quota.held_until(now).is_none() {
            self.quota.refund(now);
        }
        if isolated {
            self.last_seen = now;
            let hold = self.pace.isolated_hold();
            self.gate.pause(cfg.max_gate, answered, hold);
            return;
        }
        self.hold(cfg, now, answered, retry_at);
        if cfg.gate
            && let Some(least) = hold_at_least
        {
            self.gate.hold_at_least(cfg.max_gate, answered, least);
        }
    }

    /// Whether a rejection with no time, just counted, is isolated among
    /// successes: the pace is the caller's declared quota (a pace learned
    /// from a silent server is cut as ever: nginx's bucket, a little
    /// overrun, also rejects one request in many), the gate is open with
    /// nothing to learn pending, and most of the origin's recent answers
    /// were admissions. Such a rejection is the request's (an object
    /// another request holds, Stripe's `lock_timeout`), not the pace's:
    /// it neither closes the gate nor cuts the pace; new slots pause
    /// briefly ([`Gate::pause`](super::gate::Gate::pause)), and the
    /// rejected task takes the next one.
    fn isolated(&self, cfg: PacingConfig, now: Duration) -> bool {
        cfg.gate
            && cfg.declared.is_some()
            && self.pace.is_paced()
            && self.gate.closed_for(now).is_none()
            && !self.gate.reopen_pending
            && self.recent.mostly_admitted()
    }

    /// Closes the gate until `retry_at`, for a rejection or a spent quota
    /// the origin answered at `answered` (at or before `now`, when it is
    /// applied); without a time, for a hold of our own (see
    /// [`Gate::close_silent`](super::gate::Gate::close_silent)).
    fn hold(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        answered: Duration,
        retry_at: Option<Duration>,
    ) {
        self.last_seen = now;
        if !cfg.gate {
            return;
        }
        let closing = match retry_at {
            Some(at) => self.gate.close(cfg.max_gate, now, answered, at),
            None => {
                let admitted_since = self.period.successes > 0;
                let hold = self.pace.silent_hold();
                self.period.silent = true;
                self.gate
                    .close_silent(cfg.max_gate, answered, hold, admitted_since)
            }
        };
        if let Closing::Closed(at) = closing {
            self.period.closed(at);
        }
    }
}
