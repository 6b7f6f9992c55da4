//! The simulated server's limiters: each shape counts on the simulation's
//! clock (a `Duration` since the run started), admits or says how long
//! until it would, and says what it would state in its headers.

use std::collections::VecDeque;
use std::time::Duration;

use super::draw::{LimitPlan, Shape};

/// What a limiter states after a decision.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stated {
    pub(crate) quota: u64,
    pub(crate) window: Duration,
    pub(crate) remaining: u64,
    pub(crate) reset_in: Duration,
    /// The fixed window it spoke of (0 for other shapes).
    pub(crate) window_id: u64,
}

/// One limiter's state.
#[derive(Debug)]
pub(crate) struct Limiter {
    pub(crate) plan: LimitPlan,
    /// Fixed window: its id, end and what it used.
    id: u64,
    end: Duration,
    used: u64,
    /// Sliding log: what each admission spent, and when.
    log: VecDeque<(Duration, u64)>,
    /// Bucket / GCRA: the theoretical arrival time.
    tat: Duration,
}

fn times(d: Duration, n: u64) -> Duration {
    d.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX))
}

impl Limiter {
    pub(crate) fn new(plan: LimitPlan) -> Self {
        Limiter {
            plan,
            id: 0,
            end: Duration::ZERO,
            used: 0,
            log: VecDeque::new(),
            tat: Duration::ZERO,
        }
    }

    /// Moves a fixed window or a log to `now`.
    fn settle(&mut self, now: Duration) {
        match self.plan.shape {
            Shape::FixedWindow {
                window, anchored, ..
            } => {
                if anchored {
                    if now >= self.end {
                        self.id += 1;
                        self.end = now + window;
                        self.used = 0;
                    }
                } else {
                    let id = u64::try_from(now.as_nanos() / window.as_nanos()).unwrap_or(u64::MAX);
                    if id + 1 != self.id {
                        self.id = id + 1;
                        self.end = times(window, id + 1);
                        self.used = 0;
                    }
                }
            }
            Shape::SlidingLog { window, .. } => {
                while self.log.front().is_some_and(|(at, _)| *at + window <= now) {
                    self.log.pop_front();
                }
            }
            Shape::Bucket { .. } | Shape::Gcra { .. } => {}
        }
    }

    /// Whether `n` units would be admitted at `now`; if not, how long
    /// until they would.
    pub(crate) fn check(&mut self, now: Duration, n: u64) -> Result<(), Duration> {
        self.settle(now);
        match self.plan.shape {
            Shape::FixedWindow { count, .. } => {
                if self.used + n <= count {
                    Ok(())
                } else {
                    Err(self.end - now)
                }
            }
            Shape::SlidingLog { count, window } => {
                let sum: u64 = self.log.iter().map(|(_, c)| c).sum();
                if sum + n <= count {
                    return Ok(());
                }
                let mut left = sum;
                for (at, c) in &self.log {
                    left -= c;
                    if left + n <= count {
                        return Err(*at + window - now);
                    }
                }
                Err(window)
            }
            Shape::Bucket {
                capacity: burst,
                every,
            }
            | Shape::Gcra { burst, every } => {
                let tau = times(every, burst);
                let next = self.tat.max(now) + times(every, n);
                if next - now <= tau {
                    Ok(())
                } else {
                    Err(next - now - tau)
                }
            }
        }
    }

    /// Spends `n` units at `now` (after a `check` that admitted them).
    pub(crate) fn spend(&mut self, now: Duration, n: u64) {
        match self.plan.shape {
            Shape::FixedWindow { .. } => self.used += n,
            Shape::SlidingLog { .. } => self.log.push_back((now, n)),
            Shape::Bucket { every, .. } | Shape::Gcra { every, .. } => {
                self.tat = self.tat.max(now) + times(every, n);
            }
        }
    }

    /// What it states at `now`.
    pub(crate) fn stated(&mut self, now: Duration) -> Stated {
        self.settle(now);
        match self.plan.shape {
            Shape::FixedWindow { count, window, .. } => Stated {
                quota: count,
                window,
                remaining: count.saturating_sub(self.used),
                reset_in: self.end - now,
                window_id: self.id,
            },
            Shape::SlidingLog { count, window } => {
                let sum: u64 = self.log.iter().map(|(_, c)| c).sum();
                Stated {
                    quota: count,
                    window,
                    remaining: count.saturating_sub(sum),
                    reset_in: self
                        .log
                        .front()
                        .map_or(window, |(at, _)| *at + window - now),
                    window_id: 0,
                }
            }
            Shape::Bucket {
                capacity: burst,
                every,
            }
            | Shape::Gcra { burst, every } => {
                let tau = times(every, burst);
                let ahead = self.tat.max(now) - now;
                let free = tau.saturating_sub(ahead);
                let remaining =
                    u64::try_from(free.as_nanos() / every.as_nanos().max(1)).unwrap_or(0);
                let reset_in = if remaining == 0 {
                    // Until one unit is back.
                    ahead.saturating_sub(tau.saturating_sub(every))
                } else {
                    ahead
                };
                Stated {
                    quota: burst,
                    window: tau,
                    remaining,
                    reset_in,
                    window_id: 0,
                }
            }
        }
    }
}
