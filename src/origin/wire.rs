//! The text form a shared store keeps an origin's state in: the Redis
//! store's wire format, not API.

use std::time::Duration;

use super::OriginState;
use crate::util::nanos;

impl OriginState {
    /// A compact text form for a shared store (space-separated numbers;
    /// times in nanoseconds since the store's epoch). The wire format of
    /// the Redis store, not API.
    #[doc(hidden)]
    #[must_use]
    pub fn encode(&self) -> String {
        format!(
            "o7 {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            nanos(self.gate_until),
            nanos(self.gate_span),
            nanos(self.server_until),
            self.last_zero
                .map_or_else(|| "-".to_owned(), |t| nanos(t).to_string()),
            nanos(self.next_slot),
            self.rate,
            self.batch,
            nanos(self.batch_every),
            self.batch_left,
            nanos(self.batch_start),
            nanos(self.batch_spread),
            u8::from(self.learned),
            nanos(self.epoch_start),
            self.epoch_successes,
            u8::from(self.relearn_at_reopen),
            self.first_pushback
                .map_or_else(|| "-".to_owned(), |t| nanos(t).to_string()),
            u8::from(self.rejected),
            u8::from(self.stated),
            nanos(self.last_success),
            nanos(self.raised_at),
            nanos(self.last_seen),
            self.quota_left,
            nanos(self.quota_until),
            nanos(self.quota_probe_at),
            u8::from(self.quota_announced),
            self.reserved,
            self.last_cut
                .map_or_else(|| "-".to_owned(), |t| nanos(t).to_string()),
        )
    }

    /// Reads [`encode`](Self::encode)'s form; `None` for anything else.
    #[doc(hidden)]
    #[must_use]
    pub fn decode(s: &str) -> Option<Self> {
        let f: Vec<&str> = s.split(' ').collect();
        let [
            "o7",
            gate,
            span,
            server,
            zero,
            next,
            rate,
            batch,
            every,
            batch_left,
            batch_start,
            spread,
            learned,
            epoch,
            successes,
            closed,
            first,
            rejected,
            stated,
            last_success,
            raised,
            seen,
            quota_left,
            quota_until,
            quota_probe_at,
            quota_announced,
            reserved,
            last_cut,
        ] = f.as_slice()
        else {
            return None;
        };
        let time = |v: &str| v.parse::<u64>().ok().map(Duration::from_nanos);
        let maybe = |v: &str| match v {
            "-" => Some(None),
            v => time(v).map(Some),
        };
        let flag = |v: &str| match v {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        };
        let rate: f64 = rate.parse().ok()?;
        if !rate.is_finite() || rate < 0.0 {
            return None;
        }
        Some(OriginState {
            gate_until: time(gate)?,
            gate_span: time(span)?,
            server_until: time(server)?,
            last_zero: maybe(zero)?,
            next_slot: time(next)?,
            rate,
            batch: batch.parse().ok()?,
            batch_every: time(every)?,
            batch_left: batch_left.parse().ok()?,
            batch_start: time(batch_start)?,
            batch_spread: time(spread)?,
            learned: flag(learned)?,
            epoch_start: time(epoch)?,
            epoch_successes: successes.parse().ok()?,
            relearn_at_reopen: flag(closed)?,
            first_pushback: maybe(first)?,
            rejected: flag(rejected)?,
            stated: flag(stated)?,
            last_success: time(last_success)?,
            raised_at: time(raised)?,
            last_seen: time(seen)?,
            quota_left: quota_left.parse().ok()?,
            quota_until: time(quota_until)?,
            quota_probe_at: time(quota_probe_at)?,
            quota_announced: flag(quota_announced)?,
            reserved: reserved.parse().ok()?,
            last_cut: maybe(last_cut)?,
        })
    }

    /// How long a shared store should keep this state after `now`: until
    /// its gate, queue and spent quota's hold are over (never a server time
    /// beyond the gate's cap), plus the idle time after which an origin is
    /// forgotten.
    #[cfg(feature = "redis")]
    #[must_use]
    pub(crate) fn keep_for(&self, now: Duration, idle: Duration) -> Duration {
        self.held_until(now)
            .saturating_sub(now)
            .saturating_add(idle)
    }
}
