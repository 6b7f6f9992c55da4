//! express-rate-limit 8 with its default `MemoryStore`, `windowMs: 1000`,
//! `limit: CAP` and `standardHeaders: 'draft-8'`, as its source does it
//! (`memory-store.ts`, `headers.ts`, `rate-limit.ts`):
//!
//! - one client (every request comes from the same loopback address, the
//!   default key), whose window opens at its first hit after the last one
//!   expired: `resetTime = now + windowMs`. Windows do not align to the
//!   server's start or to whole seconds.
//! - every hit counts (`totalHits++`, rejected ones too); a hit over the
//!   limit gets `429`.
//! - every answer, `429`s too: `RateLimit-Policy: "<CAP>-in-1sec"; q=<CAP>;
//!   w=1; pk=:<partition key>:` and `RateLimit: "<CAP>-in-1sec";
//!   r=<max(0, CAP - hits)>; t=<max(0, ceil((resetTime - now) / 1 s))>`; a
//!   `429` also `Retry-After: <t>` (the same whole seconds). With a 1 s
//!   window `t` is 1 whatever is left of it: the reset is stated up to a
//!   second late, never early.

use std::time::{Duration, Instant};

use super::shapes::Verdict;

/// The draft-8 partition key express-rate-limit states for the client
/// `127.0.0.1`: the first 12 hex digits of its SHA-256, in base64.
pub const PARTITION_KEY: &str = "MTJjYTE3YjQ5YWYy";

/// The window of the client.
const WINDOW: Duration = Duration::from_secs(1);

/// The one client's record in the `MemoryStore`.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ExpressWindow {
    /// `resetTime` (`None`: no hit yet).
    reset: Option<Instant>,
    /// `totalHits` in the current window.
    hits: u32,
}

impl ExpressWindow {
    /// `increment(key)`, then the limit's verdict, for a hit at `now`: the
    /// `RateLimit` fields `(r, t)`, and for a `429` `Retry-After: <t>` and
    /// the window's reset as the instant it allows (a later hit opens the
    /// next window).
    pub(super) fn verdict(&mut self, cap: u32, now: Instant) -> Verdict {
        let reset = match self.reset {
            Some(reset) if reset > now => reset,
            _ => {
                self.hits = 0;
                *self.reset.insert(now + WINDOW)
            }
        };
        self.hits = self.hits.saturating_add(1);
        let left = reset.saturating_duration_since(now);
        let t = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        let ok = self.hits <= cap;
        Verdict {
            ok,
            retry_after: (!ok).then_some(t),
            ratelimit: Some((cap.saturating_sub(self.hits), t)),
            allowed: (!ok).then_some(reset),
            names: if ok {
                Duration::ZERO
            } else {
                Duration::from_secs(t)
            },
            status: if ok { 200 } else { 429 },
        }
    }
}
