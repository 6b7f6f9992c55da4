//! Regression tests for issue 27's task-layer defects (each failed before
//! its fix): a wait behind the queue that ended past the deadline, an
//! admission applied after its caller left, and failing open throttled to
//! the first contact's trickle.

mod deadline;
mod dropped;
mod offline;
