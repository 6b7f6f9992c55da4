//! Folding the limits one response stated into its [`RateLimitHint`]:
//! the binding limit, the latest reset, the tightest token limit.

use std::cmp::Reverse;
use std::time::Duration;

use super::{RateLimitHint, TokenLimit};

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Unit {
    /// Requests in a window: the IETF default, and every vendor's request
    /// limit.
    #[default]
    Requests,
    /// Tokens in a window (OpenAI's and Anthropic's token limits).
    Tokens,
    /// A message's input tokens only (Anthropic's input-token limit): a
    /// [`Cost`](crate::Cost) spends its input part from it.
    InputTokens,
    /// A message's output tokens only (Anthropic's output-token limit): a
    /// [`Cost`](crate::Cost) reserves its output part (`max_tokens`) from
    /// it.
    OutputTokens,
    /// Requests in flight at once (IETF `qu="concurrent-requests"`): its
    /// count is not a window's, its quota is a concurrency cap.
    Concurrent,
    /// Any other unit (IETF `qu="content-bytes"`, or a unit no draft
    /// names).
    Other,
}

/// One limit read from the headers: how much quota is left, and when it
/// comes back (at least one of the two is present), with the quota per
/// window and the window when the server stated them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Limit {
    pub(crate) remaining: Option<u64>,
    pub(crate) reset: Option<Duration>,
    /// The quota per window.
    pub(crate) quota: Option<u64>,
    /// The window the quota is for.
    pub(crate) window: Option<Duration>,
    pub(crate) unit: Unit,
    /// A bucket refilled continuously, its reset the time it is full
    /// again (Anthropic's): what is left comes back progressively.
    pub(crate) bucket: bool,
    /// How far the stated count may be from the true one either way (a
    /// count rounded to the nearest thousand: 500).
    pub(crate) slack: u64,
}

impl Limit {
    /// A request limit with no stated quota.
    pub(crate) fn new(remaining: Option<u64>, reset: Option<Duration>) -> Self {
        Limit {
            remaining,
            reset,
            ..Limit::default()
        }
    }
}

/// A candidate binding limit: one with a count, in requests or tokens.
#[derive(Debug, Clone, Copy)]
struct Binding {
    count: u64,
    quota: Option<u64>,
    unit: Unit,
    window: Option<Duration>,
}

impl Binding {
    /// Smallest binds: the smaller count, then the smaller quota (none
    /// first), a limit not in requests first, the longer window (none
    /// first). Where tied limits leave the quota in doubt, the one that
    /// says the least wins.
    fn key(&self) -> (u64, Option<u64>, bool, Reverse<Duration>) {
        (
            self.count,
            self.quota,
            self.unit == Unit::Requests,
            // A stated window is whole seconds, never `Duration::MAX`.
            Reverse(self.window.unwrap_or(Duration::MAX)),
        )
    }
}

/// Folds [`Limit`]s into a [`RateLimitHint`] without collecting them.
#[derive(Debug, Default)]
pub(crate) struct Fold {
    /// The smallest count, and the latest reset among limits with it.
    min: Option<(u64, Option<Duration>)>,
    /// The latest reset among exhausted limits.
    exhausted_reset: Option<Duration>,
    /// The latest reset among limits with a count of 0 or none.
    retry_in: Option<Duration>,
    /// The latest reset of any limit.
    latest_reset: Option<Duration>,
    /// The binding limit among those with the smallest count.
    binding: Option<Binding>,
    /// The smallest concurrency cap.
    concurrency: Option<u64>,
    /// The tightest token limit.
    tokens: Option<TokenLimit>,
    /// The tightest limit of output tokens.
    output_tokens: Option<TokenLimit>,
}

impl Fold {
    pub(crate) fn push(&mut self, limit: Limit) {
        let Limit {
            remaining,
            reset,
            quota,
            window,
            unit,
            bucket,
            slack,
        } = limit;
        let input_only = unit == Unit::InputTokens;
        if matches!(unit, Unit::Tokens | Unit::InputTokens)
            && let Some(count) = remaining
        {
            let candidate = TokenLimit {
                remaining: count,
                reset,
                limit: quota,
                bucket,
                slack,
                input_only,
            };
            // The input-token limit, when stated, is the one a cost is
            // spent from (Anthropic's combined count is the tighter of
            // input and output); else the tightest.
            let key = |t: &TokenLimit| (!t.input_only, t.remaining, Reverse(t.reset));
            self.tokens = match self.tokens {
                Some(t) if key(&t) <= key(&candidate) => Some(t),
                _ => Some(candidate),
            };
        }
        if let (Unit::OutputTokens, Some(count)) = (unit, remaining) {
            let candidate = TokenLimit {
                remaining: count,
                reset,
                limit: quota,
                bucket,
                slack,
                input_only: false,
            };
            let key = |t: &TokenLimit| (t.remaining, Reverse(t.reset));
            self.output_tokens = match self.output_tokens {
                Some(t) if key(&t) <= key(&candidate) => Some(t),
                _ => Some(candidate),
            };
        }
        if bucket && unit != Unit::Requests {
            // A bucket of tokens is a cost quota only: a count of 0 there
            // is a wait for the next request's tokens, not the whole
            // refill its reset names.
            return;
        }
        match unit {
            Unit::Requests | Unit::Tokens | Unit::InputTokens | Unit::OutputTokens => {}
            Unit::Concurrent => {
                if let Some(cap) = quota {
                    self.concurrency(cap);
                }
                return;
            }
            Unit::Other => {
                // No count; a spent quota still asks for its wait.
                if remaining == Some(0) && reset.is_some() {
                    self.latest_reset = self.latest_reset.max(reset);
                    self.retry_in = self.retry_in.max(reset);
                    self.exhausted_reset = self.exhausted_reset.max(reset);
                }
                return;
            }
        }
        self.latest_reset = self.latest_reset.max(reset);
        if let Some(count) = remaining {
            self.min = match self.min {
                Some((min, min_reset)) if min < count => Some((min, min_reset)),
                Some((min, min_reset)) if min == count => Some((min, min_reset.max(reset))),
                _ => Some((count, reset)),
            };
            let candidate = Binding {
                count,
                quota,
                unit,
                window,
            };
            if self.binding.is_none_or(|b| candidate.key() < b.key()) {
                self.binding = Some(candidate);
            }
        }
        if matches!(remaining, None | Some(0)) {
            self.retry_in = self.retry_in.max(reset);
        }
        if remaining == Some(0) {
            self.exhausted_reset = self.exhausted_reset.max(reset);
        }
    }

    /// A cap on requests in flight, with no count or reset.
    pub(crate) fn concurrency(&mut self, cap: u64) {
        self.concurrency = Some(self.concurrency.map_or(cap, |c| c.min(cap)));
    }

    pub(crate) fn finish(self) -> RateLimitHint {
        let reset = match (self.exhausted_reset, self.min) {
            (Some(r), _) => Some(r),
            (None, Some((_, r))) => r,
            (None, None) => self.latest_reset,
        };
        // Exhausted, `reset` is an exhausted limit's: a binding limit with
        // quota left (the exhaustion was another unit's) does not renew then.
        let binding = self.binding.filter(|b| {
            b.unit == Unit::Requests
                && b.quota.is_some()
                && (self.exhausted_reset.is_none() || b.count == 0)
        });
        RateLimitHint {
            remaining: self.min.map(|(count, _)| count),
            reset,
            exhausted: self.exhausted_reset.is_some(),
            retry_in: self.retry_in,
            limit: binding.and_then(|b| b.quota),
            window: binding.and_then(|b| b.window),
            concurrency: self.concurrency,
            tokens: self.tokens,
            output_tokens: self.output_tokens,
        }
    }
}
