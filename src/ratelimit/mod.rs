//! Rate-limit headers: how much quota is left, and when it comes back.
//!
//! Why read them beside `Retry-After`? Many APIs answer `429` without a
//! `Retry-After` but with their own reset headers (GitHub, OpenAI,
//! Anthropic, Discord, the IETF `RateLimit` drafts), and GitHub signals both
//! an exhausted quota and its secondary limit with `403`. Reading those turns
//! a stop for `missing_retry_after` into a wait the server itself asked
//! for, and tells a `403` that asks for a wait from one that refuses.
//!
//! Why strict? The same as for `Retry-After`: a guessed reset either hammers
//! the server or stalls the client. Each header's format is declared, never
//! sniffed; a value that does not match it exactly is skipped. Structured
//! Fields go through the `sfv` parser. A value too large to represent
//! saturates to an enormous delay that no wait limit accepts.
//!
//! This module reads no clock: times are measured from a `server_now` the
//! caller passes in.

mod headers;
mod hint;
pub(crate) mod ietf;
mod reset;

pub use headers::RateLimitHeaders;
pub(crate) use headers::{Scoping, decimal_seconds, should_retry, single, stated_bucket};
pub use hint::{RateLimitHint, TokenLimit};
pub use reset::{MAX_RATELIMIT_LEN, ResetFormat, parse_reset};
