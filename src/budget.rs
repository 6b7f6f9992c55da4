//! The client-wide retry budget: pure state, like the rest of the core.
//! `now` is a [`Duration`] since an epoch the store chooses.

use std::time::Duration;

use crate::util::nanos;

/// Limits of the client-wide retry budget (in the manner of Finagle's
/// `RetryBudget` and gRPC retry throttling).
///
/// Why a budget and not only max attempts? Max attempts bound one task;
/// under a sustained overload every task still multiplies its traffic by
/// `max_attempts`. A budget bounds retries as a share of recent first sends:
/// each first send deposits `ratio` of a retry, time adds `min_per_sec`
/// retries a second (so a quiet client can still retry), and the balance is
/// capped at `ratio × 10 s` of traffic plus `min_per_sec × 10 s`.
///
/// The budget bounds amplification, not patience: only a retry at a delay
/// of the policy's own choosing that no origin gate holds spends it (a
/// pushback without a time, with [`Policy::origin_gate`](crate::Policy::origin_gate)
/// off, or answered by where a redirect led). A retry that waits at the
/// origin's gate, at the server's time or, without one, for a hold of the
/// gate's own, leaves at the pace the origin was seen to admit (one probe
/// per hold while it admits nothing): it adds no load beyond that, and
/// budgeting it would fail tasks a polite client gets through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBudget {
    pub(crate) ratio: f64,
    pub(crate) min_per_sec: f64,
    pub(crate) enabled: bool,
}

impl Default for RetryBudget {
    /// 20% of first sends plus 10 retries a second: reqwest's and Finagle's
    /// numbers.
    fn default() -> Self {
        RetryBudget {
            ratio: 0.2,
            min_per_sec: 10.0,
            enabled: true,
        }
    }
}

impl RetryBudget {
    /// A budget of `ratio` retries per first send (0.0 to 1.0) plus
    /// `min_per_sec` retries a second.
    #[must_use]
    pub fn new(ratio: f64, min_per_sec: f64) -> Self {
        RetryBudget {
            ratio,
            min_per_sec,
            enabled: true,
        }
    }

    /// No budget: every retry the other limits allow is made.
    #[must_use]
    pub fn unlimited() -> Self {
        RetryBudget {
            enabled: false,
            ..RetryBudget::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        if !self.enabled {
            return Ok(());
        }
        if !(0.0..=1.0).contains(&self.ratio) || self.ratio.is_nan() {
            return Err("retry budget ratio must be within 0.0..=1.0");
        }
        if !(self.min_per_sec >= 0.0 && self.min_per_sec.is_finite()) {
            return Err("retry budget min_per_sec must be finite and not negative");
        }
        if self.ratio == 0.0 && self.min_per_sec == 0.0 {
            return Err(
                "retry budget allows no retry; use RetryBudget::unlimited() or max_attempts(1)",
            );
        }
        Ok(())
    }

    fn capacity(&self) -> f64 {
        // Ten seconds' worth, as Finagle's default TTL; never below one retry.
        (self.min_per_sec * 10.0 + self.ratio * 100.0).max(1.0)
    }
}

/// The balance of a [`RetryBudget`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetState {
    tokens: f64,
    updated: Duration,
}

impl BudgetState {
    /// A full budget at `now` (whatever its [`RetryBudget`]'s capacity:
    /// the first step taken on it caps the balance).
    #[must_use]
    pub fn new(now: Duration) -> Self {
        BudgetState {
            tokens: f64::INFINITY,
            updated: now,
        }
    }

    fn refill(&mut self, budget: &RetryBudget, now: Duration) {
        let elapsed = now.saturating_sub(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * budget.min_per_sec).min(budget.capacity());
        self.updated = self.updated.max(now);
    }

    /// A first send at `now` deposits its share.
    pub fn deposit(&mut self, budget: &RetryBudget, now: Duration) {
        self.refill(budget, now);
        self.tokens = (self.tokens + budget.ratio).min(budget.capacity());
    }

    /// A retry at `now` asks for a token; `false` when the budget is empty.
    #[must_use]
    pub fn withdraw(&mut self, budget: &RetryBudget, now: Duration) -> bool {
        if !budget.enabled {
            return true;
        }
        self.refill(budget, now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// A token withdrawn at `now` for a retry that was never sent comes
    /// back.
    pub fn refund(&mut self, budget: &RetryBudget, now: Duration) {
        self.refill(budget, now);
        self.tokens = (self.tokens + 1.0).min(budget.capacity());
    }

    /// Retries available when the balance was last updated (infinite for
    /// a new, full budget no step was taken on yet).
    #[must_use]
    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}

impl BudgetState {
    /// A compact text form for a shared store: the wire format of the
    /// Redis store, not API.
    #[doc(hidden)]
    #[must_use]
    pub fn encode(&self) -> String {
        format!("b1 {} {}", self.tokens, nanos(self.updated))
    }

    /// Reads [`encode`](Self::encode)'s form; `None` for anything else.
    #[doc(hidden)]
    #[must_use]
    pub fn decode(s: &str) -> Option<Self> {
        let mut it = s.split(' ');
        if it.next()? != "b1" {
            return None;
        }
        let tokens: f64 = it.next()?.parse().ok()?;
        let updated = Duration::from_nanos(it.next()?.parse().ok()?);
        // `inf`: a new, full budget.
        if it.next().is_some() || tokens.is_nan() || tokens < 0.0 {
            return None;
        }
        Some(BudgetState { tokens, updated })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn state_round_trips_through_its_text_form() {
        let mut b = BudgetState::new(ms(5));
        assert_eq!(BudgetState::decode(&b.encode()), Some(b));
        b.deposit(&RetryBudget::default(), ms(6));
        assert_eq!(BudgetState::decode(&b.encode()), Some(b));
        assert_eq!(BudgetState::decode("b1 NaN 3"), None);
    }

    #[test]
    fn budget_spends_and_refills() {
        let b = RetryBudget::new(0.5, 1.0);
        let mut s = BudgetState::new(ms(0));
        let cap = b.capacity();
        let mut granted = 0;
        while s.withdraw(&b, ms(0)) {
            granted += 1;
        }
        assert_eq!(f64::from(granted), cap.floor());
        // Two first sends deposit one retry.
        s.deposit(&b, ms(0));
        s.deposit(&b, ms(0));
        assert!(s.withdraw(&b, ms(0)));
        assert!(!s.withdraw(&b, ms(0)));
        // One second refills `min_per_sec`.
        assert!(s.withdraw(&b, ms(1000)));
        assert!(RetryBudget::unlimited().validate().is_ok());
        assert!(RetryBudget::new(0.0, 0.0).validate().is_err());
        assert!(RetryBudget::new(1.5, 1.0).validate().is_err());
    }
}
