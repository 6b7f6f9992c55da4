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
    /// The longest such hold, reached by doubling while every probe is
    /// rejected (an outage): a server down for long sees one probe per this
    /// span, and one back up waits at most this long to be found out.
    pub(crate) silent_hold_max: Duration,
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
    epoch_max: Duration::from_secs(60),
    origin_idle: Duration::from_secs(300),
    silent_hold: Duration::from_secs(1),
    silent_hold_max: Duration::from_secs(8),
};
