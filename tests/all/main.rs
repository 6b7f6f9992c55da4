//! The one integration test binary: parser and planner tables and
//! properties, and the middleware over real HTTP on loopback (wiremock).

mod fuzz;
mod known_deviations;
mod middleware;
mod parser;
mod planner;
mod ratelimit;
#[cfg(feature = "redis")]
mod redis;
mod review_fixes;
