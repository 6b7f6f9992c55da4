//! `RedisStore` against a real `redis-server` on loopback, started by these
//! tests on a free port and killed when each test ends; one file per topic.
//!
//! A missing `redis-server` fails the tests (it never skips them). Timing
//! assertions are taken on the server's side (arrival times of requests);
//! lower bounds are exact, upper bounds loose. Every test is bounded by a
//! timeout, so a hung store fails instead of hanging the run.

#[path = "../../support/redis_server.rs"]
pub(crate) mod redis_server;

#[path = "../../support/redis_cluster.rs"]
pub(crate) mod redis_cluster;

#[path = "../../support/delay_proxy.rs"]
pub(crate) mod delay_proxy;

mod cluster;
mod fail_open_fast;
mod faults;
mod gate;
mod keys;
mod leases;
mod limit_server;
mod llm;
mod local_key;
mod local_state;
mod multi_process;
mod review;
mod review27;
mod review27_leases;
mod scopes;
mod support;
