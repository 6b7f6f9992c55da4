//! The tuned numbers of the gate, the quota and the pace, in one place,
//! each with the reason for its value.

use std::time::Duration;

/// The numbers the origin's parts are tuned with. One value,
/// [`TUNING`]; a field is read where its rule lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tuning {
    /// The lowest pace, in requests per second: a server that admitted
    /// nothing gets one probe a second.
    pub(crate) min_rate: f64,
    /// Pace increase per success before any rate was learned (slow start:
    /// the rate about doubles each second).
    pub(crate) slow_start_step: f64,
    /// How far ahead a slot is booked while the pace is still in slow
    /// start: a slot booked far ahead at today's slow rate would stay there
    /// when the rate rises.
    pub(crate) slow_start_ahead: Duration,
    /// After a learned pace ran this long without a pushback, it is raised
    /// by [`raise_factor`](Self::raise_factor). Rarely, because with
    /// whole-second `Retry-After` values one rejection late in a server's
    /// window closes the gate for nearly a whole window: probing upward
    /// costs far more than it finds.
    pub(crate) raise_every: Duration,
    /// See [`raise_every`](Self::raise_every).
    pub(crate) raise_factor: f64,
    /// Multiplicative cut of a learned batch on a pushback while pacing.
    pub(crate) cut_factor: f64,
    /// The deepest single cut of a learned batch.
    pub(crate) cut_floor: f64,
    /// Spacing of batches beyond the server's own period: at least this, so
    /// that timer and network lateness never puts two batches into one of
    /// its windows, and a bucket refills fully between them.
    pub(crate) batch_margin: Duration,
    /// [`batch_margin`](Self::batch_margin) as a share of the period, when
    /// that is more.
    pub(crate) batch_margin_share: f64,
    /// The probe's head start over the rest of the first batch after a
    /// reopening, at least: its answer closes the gate again before the
    /// batch follows it into a rejection.
    pub(crate) probe_gap_min: Duration,
    /// And at most.
    pub(crate) probe_gap_max: Duration,
    /// The granularity of `Retry-After`: whole seconds. A server that
    /// truncates its time (Flask-Limiter, tower-governor) says 0 for "under
    /// a second", so a retry at once lands in the same closed window. An
    /// origin answering 0 twice within this span is held this long at its
    /// gate, and a task that falls back after a zero closes the gate for at
    /// most this long (the task alone backs off further).
    pub(crate) zero_granularity: Duration,
    /// Two stated resets less than this apart are the same window's
    /// (servers round their reset to whole seconds).
    pub(crate) same_window: Duration,
    /// A period whose successes ended more than this share of the server's
    /// period before its first pushback was quiet when it was pushed back:
    /// what it admitted is a lower bound of the origin's rate, not a
    /// ceiling (one success, then `Retry-After: 30`, is no limit of one
    /// per 30 s: the queue would take an hour). Its pace starts slow and
    /// rises (slow start) until a pushback measures it. A burst's answers
    /// all come within a round trip; a client sending a tenth of the
    /// period apart sent fewer than ten per period: little to learn from
    /// either way.
    pub(crate) quiet_share: f64,
    /// Longest measuring period before the gate first closes: what an
    /// origin admitted long ago says little about its limit now.
    pub(crate) epoch_max: Duration,
    /// An origin that holds nothing and that nobody used for this long is
    /// forgotten (by a store's sweep, or a shared key's TTL).
    pub(crate) origin_idle: Duration,
    /// How long the gate holds an origin after a pushback with no time at
    /// all: a second, the granularity of servers' windows and the period
    /// most limiters that send no time are configured in (nginx's `rate=N
    /// r/s`, HAProxy's `http_req_rate(1s)`). The pace learns from what the
    /// origin admitted per hold, so a hold longer than the server's period
    /// would learn a rate below its own.
    pub(crate) silent_hold: Duration,
    /// The hold after a probe that followed a whole
    /// [`silent_hold`](Self::silent_hold) and was rejected too: the server's
    /// period is longer than a second, or it counts what it denies (HAProxy
    /// after a burst of a few times its rate admits again within about two
    /// seconds), or it is down. A probe costs the server one request, so
    /// the next comes soon and the holds grow from there. A fifth of a
    /// second: HAProxy's rate after a burst of B over a cap of C weighs the
    /// burst's period less and less through the next, and admits again
    /// `C / B` of a period before that one ends; probing each fifth of a
    /// second for the first half second finds it within a fifth (a
    /// quarter, growing by half, found 72 over 50 a third of a second
    /// late, and cost the steady load 1–2 requests a second of 50).
    pub(crate) silent_probe_hold: Duration,
    /// How such holds grow while the probes are rejected: by 60% (1,
    /// then 0.2, 0.32, 0.51, 0.82, 1.31, 2 s...): an outage of 20 s sees
    /// about one probe a second, at most three in any second.
    pub(crate) silent_hold_growth: f64,
    /// The longest such hold: a server down for long sees one probe per
    /// this span (within the bound of about two a second), and one
    /// back up is found within it.
    pub(crate) silent_hold_max: Duration,
    /// A smooth pace's first hold after a pushback with no time, in its
    /// intervals: its rejection says it was one request over the rate, and
    /// a limiter that counts what it denies admits again after a few
    /// intervals of quiet.
    pub(crate) smooth_hold_intervals: u32,
    /// And at least.
    pub(crate) smooth_hold_min: Duration,
    /// A smooth pace that ran this long without a pushback rises by
    /// [`smooth_raise_factor`](Self::smooth_raise_factor): its pushbacks
    /// cost a short hold and a tenth of the rate, not a window, so it
    /// probes upward often, in small steps.
    pub(crate) smooth_raise_every: Duration,
    /// See [`smooth_raise_every`](Self::smooth_raise_every).
    pub(crate) smooth_raise_factor: f64,
    /// How soon a task waiting for an origin's first answer asks again: as
    /// long as the first contact has been out, within these bounds. On
    /// loopback the answer is back within the lower bound; across an ocean
    /// the asks halve in number each round trip, and a shared store sees a
    /// few per waiting task, not one per millisecond.
    pub(crate) first_poll: (Duration, Duration),
    /// How long after the first answer the tasks that waited for it may
    /// still join its wave before the wave can end: as long as the first
    /// contact was out, within these bounds. A task of another process
    /// was told to ask again within that (see
    /// [`first_poll`](Self::first_poll)); the tasks of this one are woken
    /// by the answer, all at once. Only tasks new to the origin wait for
    /// that: the least is the poll's (2 ms), since a burst's requests
    /// that start just after the first answer wait with the follow-ups,
    /// at least this long.
    pub(crate) wave_join: (Duration, Duration),
    /// The stray of the costs of requests that declare none, as a share of
    /// their mean (σ / mean): a request spending the mean leaves only
    /// with room for this stray over the costs not yet counted (see
    /// `guessed.rs`). An LLM's costs (prompt plus answer) stray by half
    /// their mean and more; costs spread evenly from a quarter of the
    /// mean to 1.75 times it stray by 0.43 of it. This is about 1.75 such
    /// strays: a round of requests overshoots its window about once in
    /// twenty-five. Not learned from the stated falls: answers that cross
    /// in flight fall by several costs at once.
    pub(crate) cost_spread: f64,
}

/// The tuning in force.
pub(crate) const TUNING: Tuning = Tuning {
    min_rate: 1.0,
    slow_start_step: 1.0,
    slow_start_ahead: Duration::from_secs(1),
    raise_every: Duration::from_secs(10),
    raise_factor: 1.1,
    cut_factor: 0.9,
    cut_floor: 0.5,
    batch_margin: Duration::from_millis(20),
    batch_margin_share: 0.02,
    probe_gap_min: Duration::from_millis(10),
    probe_gap_max: Duration::from_millis(50),
    zero_granularity: Duration::from_secs(1),
    same_window: Duration::from_millis(500),
    quiet_share: 0.1,
    epoch_max: Duration::from_secs(60),
    origin_idle: Duration::from_secs(300),
    silent_hold: Duration::from_secs(1),
    silent_probe_hold: Duration::from_millis(200),
    silent_hold_growth: 1.6,
    silent_hold_max: Duration::from_secs(2),
    smooth_hold_intervals: 4,
    smooth_hold_min: Duration::from_millis(50),
    smooth_raise_every: Duration::from_secs(1),
    smooth_raise_factor: 1.02,
    first_poll: (Duration::from_millis(2), Duration::from_millis(50)),
    wave_join: (Duration::from_millis(2), Duration::from_millis(50)),
    cost_spread: 0.75,
};
