//! The Redis row: the same N tasks split over [`WORKERS`] processes (this
//! binary re-run as workers), each with
//! `RetryAfterMiddleware::with_store(Policy::default(), RedisStore)` (with
//! `STORM_DECLARE`, the server's quota declared for its origin, passed to
//! the workers in `STORM_WORKER_QUOTA`), against the parent's rate-limited
//! server and one `redis-server`.

use std::time::Duration;

mod row;
mod targets;
mod wire;
mod worker;

pub(crate) use row::run;
pub(crate) use targets::targets;
pub(crate) use worker::Worker;

/// Worker processes in the row (its name says 4).
pub(crate) const WORKERS: u32 = 4;
/// From spawning the workers to the instant they all start their tasks:
/// room for process start-up and the Redis connection, so that neither
/// skews the burst.
const START_DELAY: Duration = Duration::from_secs(1);
/// How long after the row's limit a worker may take to report before it
/// is killed.
const GRACE: Duration = Duration::from_secs(5);
/// A worker that started its tasks this late after the shared instant
/// is reported.
const LATE: Duration = Duration::from_millis(20);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
