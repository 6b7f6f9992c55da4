//! The text form a shared store keeps an origin's state in: the Redis
//! store's wire format, not API.

use std::time::Duration;

use super::OriginState;
use super::first::First;
use super::gate::Gate;
use super::pace::{Batches, Mode, Pace};
use super::period::Period;
use super::recent::Recent;
use super::stated::StatedQuota;
use super::tokens::Tokens;
use crate::util::nanos;

impl OriginState {
    /// A compact text form for a shared store (space-separated numbers;
    /// times in nanoseconds since the store's epoch). The wire format of
    /// the Redis store, not API.
    #[doc(hidden)]
    #[must_use]
    pub fn encode(&self) -> String {
        let (gate, quota, pace, period) = (&self.gate, &self.quota, &self.pace, &self.period);
        let tokens = &self.tokens;
        let batches = match pace.mode {
            Mode::Batches(b) => b,
            _ => Batches {
                size: 0,
                every: Duration::ZERO,
                left: 0,
                admitted: 0,
                start: Duration::ZERO,
                spread: Duration::ZERO,
            },
        };
        let maybe =
            |t: Option<Duration>| t.map_or_else(|| "-".to_owned(), |t| nanos(t).to_string());
        format!(
            "o19 {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            nanos(gate.until),
            nanos(gate.span),
            nanos(gate.server_until),
            maybe(gate.last_zero),
            nanos(pace.next_slot),
            pace.rate(),
            batches.size,
            nanos(batches.every),
            batches.left,
            nanos(batches.start),
            nanos(batches.spread),
            match pace.mode {
                Mode::Unpaced => 0,
                Mode::Batches(_) => 1,
                Mode::SlowStart { .. } => 2,
                Mode::Smooth { .. } => 3,
            },
            nanos(period.start),
            period.successes,
            u8::from(gate.reopen_pending),
            maybe(period.first_pushback),
            u8::from(period.rejected),
            u8::from(period.stated),
            nanos(period.last_success),
            nanos(pace.raised_at),
            nanos(self.last_seen),
            quota.left,
            nanos(quota.until),
            nanos(quota.probe_at),
            u8::from(quota.announced),
            pace.reserved,
            nanos(gate.silent),
            nanos(pace.settled),
            batches.admitted,
            pace.queue,
            u8::from(period.silent),
            gate.silent_probes,
            match pace.mode {
                Mode::Smooth { burst, .. } => burst,
                _ => 1,
            },
            quota.limit,
            nanos(quota.window),
            nanos(quota.opened),
            u8::from(self.first.answered),
            maybe(self.first.sent),
            tokens.quota.left,
            nanos(tokens.quota.until),
            nanos(tokens.quota.probe_at),
            u8::from(tokens.quota.announced),
            tokens.quota.limit,
            nanos(tokens.quota.window),
            nanos(tokens.quota.opened),
            tokens.mean,
            tokens.high,
            tokens.low,
            tokens.seen,
            nanos(tokens.declared),
            u8::from(quota.guessed),
            u8::from(tokens.quota.guessed),
            u8::from(quota.stated_spent),
            u8::from(tokens.quota.stated_spent),
            self.recent.rejected,
            self.recent.seen,
            nanos(gate.paused_until),
            u8::from(tokens.bucket),
            u8::from(tokens.input_only),
            nanos(tokens.period),
            nanos(tokens.at),
            tokens.in_flight,
            tokens.in_flight_requests,
            nanos(tokens.stated_at),
            self.output.quota.left,
            nanos(self.output.quota.until),
            self.output.quota.limit,
            nanos(self.output.quota.window),
            u8::from(self.output.quota.announced),
            u8::from(self.output.bucket),
            nanos(self.output.period),
            nanos(self.output.at),
            self.output.in_flight,
            self.output.in_flight_requests,
            self.output.mean,
            self.output.high,
            self.output.seen,
            nanos(self.output.stated_at),
            u8::from(period.other_limit),
            period.before_pushback,
            u8::from(self.first.waited),
            maybe(self.first.wave),
            self.first.out,
            self.first.heard,
            tokens.samples,
            tokens.unanswered,
        )
    }

    /// Reads [`encode`](Self::encode)'s form; `None` for anything else.
    #[doc(hidden)]
    #[must_use]
    pub fn decode(s: &str) -> Option<Self> {
        let f: Vec<&str> = s.split(' ').collect();
        let [
            "o19",
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
            mode,
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
            silent,
            settled,
            admitted,
            queue,
            silent_period,
            silent_probes,
            burst,
            quota_limit,
            quota_window,
            quota_opened,
            answered,
            first_sent,
            tokens_left,
            tokens_until,
            tokens_probe_at,
            tokens_announced,
            tokens_limit,
            tokens_window,
            tokens_opened,
            tokens_mean,
            tokens_high,
            tokens_low,
            tokens_seen,
            tokens_declared,
            quota_guessed,
            tokens_guessed,
            quota_stated_spent,
            tokens_stated_spent,
            recent_rejected,
            recent_seen,
            paused_until,
            tokens_bucket,
            tokens_input_only,
            tokens_period,
            tokens_at,
            tokens_in_flight,
            tokens_in_flight_requests,
            tokens_stated_at,
            output_left,
            output_until,
            output_limit,
            output_window,
            output_announced,
            output_bucket,
            output_period,
            output_at,
            output_in_flight,
            output_in_flight_requests,
            output_mean,
            output_high,
            output_seen,
            output_stated_at,
            other_limit,
            before_pushback,
            first_waited,
            first_wave,
            first_out,
            first_heard,
            tokens_samples,
            tokens_unanswered,
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
        let size: u32 = batch.parse().ok()?;
        let mode = match *mode {
            "0" => Mode::Unpaced,
            "1" if size > 0 => Mode::Batches(Batches {
                size,
                every: time(every)?,
                left: batch_left.parse().ok()?,
                admitted: admitted.parse().ok()?,
                start: time(batch_start)?,
                spread: time(spread)?,
            }),
            "2" if rate > 0.0 => Mode::SlowStart { rate },
            "3" if rate > 0.0 => Mode::Smooth {
                rate,
                burst: burst.parse().ok().filter(|&b| b > 0)?,
            },
            _ => return None,
        };
        Some(OriginState {
            gate: Gate {
                until: time(gate)?,
                span: time(span)?,
                server_until: time(server)?,
                last_zero: maybe(zero)?,
                reopen_pending: flag(closed)?,
                silent: time(silent)?,
                silent_probes: silent_probes.parse().ok()?,
                paused_until: time(paused_until)?,
            },
            quota: StatedQuota {
                left: quota_left.parse().ok()?,
                until: time(quota_until)?,
                probe_at: time(quota_probe_at)?,
                announced: flag(quota_announced)?,
                limit: quota_limit.parse().ok()?,
                window: time(quota_window)?,
                opened: time(quota_opened)?,
                guessed: flag(quota_guessed)?,
                stated_spent: flag(quota_stated_spent)?,
            },
            tokens: Tokens {
                quota: StatedQuota {
                    left: tokens_left.parse().ok()?,
                    until: time(tokens_until)?,
                    probe_at: time(tokens_probe_at)?,
                    announced: flag(tokens_announced)?,
                    limit: tokens_limit.parse().ok()?,
                    window: time(tokens_window)?,
                    opened: time(tokens_opened)?,
                    guessed: flag(tokens_guessed)?,
                    stated_spent: flag(tokens_stated_spent)?,
                },
                mean: tokens_mean.parse().ok()?,
                high: tokens_high.parse().ok()?,
                low: tokens_low.parse().ok()?,
                seen: tokens_seen.parse().ok()?,
                declared: time(tokens_declared)?,
                bucket: flag(tokens_bucket)?,
                input_only: flag(tokens_input_only)?,
                period: time(tokens_period)?,
                at: time(tokens_at)?,
                in_flight: tokens_in_flight.parse().ok()?,
                in_flight_requests: tokens_in_flight_requests.parse().ok()?,
                stated_at: time(tokens_stated_at)?,
                samples: tokens_samples.parse().ok()?,
                unanswered: tokens_unanswered.parse().ok()?,
            },
            output: Tokens {
                quota: StatedQuota {
                    left: output_left.parse().ok()?,
                    until: time(output_until)?,
                    limit: output_limit.parse().ok()?,
                    window: time(output_window)?,
                    announced: flag(output_announced)?,
                    ..StatedQuota::default()
                },
                bucket: flag(output_bucket)?,
                period: time(output_period)?,
                at: time(output_at)?,
                in_flight: output_in_flight.parse().ok()?,
                in_flight_requests: output_in_flight_requests.parse().ok()?,
                mean: output_mean.parse().ok()?,
                high: output_high.parse().ok()?,
                seen: output_seen.parse().ok()?,
                stated_at: time(output_stated_at)?,
                ..Tokens::default()
            },
            pace: Pace {
                mode,
                next_slot: time(next)?,
                reserved: reserved.parse().ok()?,
                settled: time(settled)?,
                raised_at: time(raised)?,
                queue: queue.parse().ok()?,
            },
            period: Period {
                start: time(epoch)?,
                successes: successes.parse().ok()?,
                first_pushback: maybe(first)?,
                rejected: flag(rejected)?,
                stated: flag(stated)?,
                silent: flag(silent_period)?,
                last_success: time(last_success)?,
                other_limit: flag(other_limit)?,
                before_pushback: before_pushback.parse().ok()?,
            },
            recent: Recent::from_parts(recent_rejected.parse().ok()?, recent_seen.parse().ok()?)?,
            first: First {
                answered: flag(answered)?,
                sent: maybe(first_sent)?,
                waited: flag(first_waited)?,
                wave: maybe(first_wave)?,
                out: first_out.parse().ok()?,
                heard: first_heard.parse().ok()?,
            },
            last_seen: time(seen)?,
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
