//! Regression tests for issue 27's task-layer defects (each failed before
//! its fix): a wait behind the queue that ended past the deadline, an
//! admission applied after its caller left (or after the coalescing wait
//! gave up), and failing open throttled to the first contact's trickle
//! (over Redis: `redis/review27.rs`).

mod coalesced;
mod deadline;
mod delayed;
mod dropped;
