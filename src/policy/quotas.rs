//! Declared quotas and caps of an origin: what its documentation says it
//! admits, so the first burst is paced.

use super::Policy;
use crate::quota::{Quota, Target};

impl Policy {
    /// Declares the quota of `origin`: a URL's origin
    /// (`https://api.example.com`, any path ignored, the scheme's port
    /// unless one is given), a bare host (`api.example.com`: every scheme
    /// and port), or `*`: every origin this policy calls that no URL or
    /// host declaration covers (a vendor preset's documented rate, which
    /// the caller changes by declaring `*` again, or a URL or host).
    /// Requests to it are paced to the quota from the very first
    /// ([`Quota`] says how each shape is kept), with no first wave of
    /// `429`s; the origin's rate-limit headers still count, and the tightest
    /// binds. A quota in requests and one in cost units ([`Quota::units`])
    /// for the same origin both bind. Declared again for the same origin in
    /// the same unit, the later declaration replaces the earlier; an origin
    /// matched by several takes the most specific (per unit): its URL's,
    /// else its host's, else `*`'s. Needs `origin_gate`; shared through the
    /// store like the gate (each process declares the same).
    ///
    /// An origin that cannot be read, a count of 0, or a span under a
    /// millisecond or over [`Quota::LONGEST_SPAN`] (366 days) make the
    /// policy invalid ([`InvalidPolicy::Quota`](crate::InvalidPolicy::Quota)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use reqwest_backpressure::{Policy, Quota};
    ///
    /// // An LLM key's 500 requests a minute.
    /// let policy = Policy::default().quota("https://api.openai.com", Quota::per_minute(500));
    /// assert!(policy.validate().is_ok());
    /// assert!(Policy::default().quota("not a host", Quota::per_second(5)).validate().is_err());
    ///
    /// // Stripe's live-mode rate for every origin, and test mode's for one.
    /// let policy = Policy::default()
    ///     .quota("*", Quota::per_second(100))
    ///     .quota("https://sandbox.example.com", Quota::per_second(25));
    /// assert!(policy.validate().is_ok());
    /// ```
    #[must_use]
    pub fn quota(mut self, origin: &str, quota: Quota) -> Self {
        let target = Target::parse(origin);
        self.quotas.retain(|(t, q)| {
            *t != target || *t == Target::Invalid || q.is_units() != quota.is_units()
        });
        self.quotas.push((target, quota));
        self
    }

    /// Caps the requests to `origin` (as in [`quota`](Self::quota): a URL's
    /// origin or a bare host) in flight at once, in this process, at `n`
    /// (GitHub allows 100). A task holds a permit from before its send
    /// until its answer's headers arrive, and gives it back then (also
    /// while it waits for a retry), or when it is dropped. A cap the server
    /// states (`RateLimit-Policy: "c";q=10;qu="concurrent-requests"`) holds
    /// as well; the lower binds. A cap of 0 makes the policy invalid.
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// let policy = Policy::default().max_in_flight("api.github.com", 100);
    /// assert!(policy.validate().is_ok());
    /// assert!(Policy::default().max_in_flight("api.github.com", 0).validate().is_err());
    /// ```
    #[must_use]
    pub fn max_in_flight(mut self, origin: &str, n: u32) -> Self {
        let target = Target::parse(origin);
        self.in_flight
            .retain(|(t, _)| *t != target || *t == Target::Invalid);
        self.in_flight.push((target, n));
        self
    }
}
