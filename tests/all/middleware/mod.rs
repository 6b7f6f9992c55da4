//! The middleware, one file per topic.
//!
//! Every assertion is about what the *server* saw (request counts, arrival
//! times taken on the server's thread, headers) or about the `RetryReport` /
//! error the caller got back. Timing uses real time: lower bounds are exact
//! (never earlier than the server allowed), upper bounds are loose.

mod body;
mod budget;
mod deadline;
mod errors;
mod gate;
mod http_date;
mod idempotency;
mod retry;
mod support;
