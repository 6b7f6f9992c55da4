//! The one integration test binary: parser and planner tables and
//! properties, and the middleware over real HTTP on loopback (wiremock).

mod anthropic;
mod batches;
mod common;
#[cfg(feature = "conformance")]
mod conformance;
mod declared_scopes;
#[cfg(feature = "conformance")]
mod external_store;
mod fuzz;
mod github;
mod known_deviations;
mod known_quotas;
mod llm;
mod middleware;
mod offline;
mod origin_status;
mod outage;
mod parser;
mod planner;
mod rate_limited;
mod ratelimit;
mod ratelimit_quota;
#[cfg(feature = "redis")]
mod redis;
mod reliability;
mod review27_origin;
mod review27_quiet;
mod review27_stated;
mod review27_task;
mod review_defects;
mod review_fixes;
mod scopes;
mod server_shapes;
mod shopify;
mod sim;
mod stripe;

/// The test server (arrival log, rate-limited server), shared with the storm
/// bench and the demo.
#[path = "../support/server.rs"]
mod server;
