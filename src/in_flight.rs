//! Caps on requests in flight per origin: declared
//! ([`Policy::max_in_flight`](crate::Policy::max_in_flight)) or stated by
//! the server (`RateLimit-Policy: "c";q=10;qu="concurrent-requests"`), each
//! held as a permit from before a task's send until its answer arrives (or
//! the task is dropped), in this process.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::util::lock;

/// The caps of one middleware, by origin.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    caps: Mutex<HashMap<String, Arc<Cap>>>,
    /// Whether a server stated a cap (then every origin is looked up).
    stated: AtomicBool,
}

/// One origin's cap.
#[derive(Debug)]
struct Cap {
    permits: Arc<Semaphore>,
    /// The cap now, and permits still to take out of circulation when a
    /// lower cap was stated while they were held.
    limit: Mutex<Limit>,
}

#[derive(Debug, Clone, Copy)]
struct Limit {
    total: u32,
    debt: u32,
}

/// A request in flight: its permit goes back when this is dropped.
#[derive(Debug)]
pub(crate) struct InFlightPermit {
    permit: Option<OwnedSemaphorePermit>,
    cap: Arc<Cap>,
}

impl Drop for InFlightPermit {
    fn drop(&mut self) {
        let mut limit = lock(&self.cap.limit);
        if limit.debt > 0 {
            limit.debt -= 1;
            if let Some(p) = self.permit.take() {
                p.forget();
            }
        }
    }
}

/// Most origins a middleware keeps a cap for that it was not told of by
/// its policy; past it, caps no task holds are forgotten.
const MAX_CAPS: usize = 1024;

impl InFlight {
    /// Whether a task to an origin with `declared` must ask for a permit.
    pub(crate) fn applies(&self, declared: Option<u32>) -> bool {
        declared.is_some() || self.stated.load(Ordering::Relaxed)
    }

    /// A permit for a request to `origin` (`declared`: the policy's cap),
    /// once one is free; `None` when the origin has no cap.
    pub(crate) async fn acquire(
        &self,
        origin: &str,
        declared: Option<u32>,
    ) -> Option<InFlightPermit> {
        let cap = {
            let mut caps = lock(&self.caps);
            match caps.get(origin) {
                Some(cap) => Arc::clone(cap),
                None => {
                    let total = declared?;
                    let cap = Arc::new(Cap::new(total));
                    caps.insert(origin.to_owned(), Arc::clone(&cap));
                    cap
                }
            }
        };
        let permit = Arc::clone(&cap.permits).acquire_owned().await.ok()?;
        Some(InFlightPermit {
            permit: Some(permit),
            cap,
        })
    }

    /// `origin` stated a cap of `stated` requests in flight: it holds from
    /// now (the lower of it and `declared`).
    pub(crate) fn stated(&self, origin: &str, stated: u64, declared: Option<u32>) {
        let stated = u32::try_from(stated).unwrap_or(u32::MAX).max(1);
        let total = declared.map_or(stated, |d| d.min(stated));
        self.stated.store(true, Ordering::Relaxed);
        let mut caps = lock(&self.caps);
        if caps.len() >= MAX_CAPS && !caps.contains_key(origin) {
            caps.retain(|_, cap| Arc::strong_count(cap) > 1);
        }
        match caps.get(origin) {
            Some(cap) => cap.resize(total),
            None => {
                caps.insert(origin.to_owned(), Arc::new(Cap::new(total)));
            }
        }
    }
}

impl Cap {
    fn new(total: u32) -> Self {
        Cap {
            permits: Arc::new(Semaphore::new(total as usize)),
            limit: Mutex::new(Limit { total, debt: 0 }),
        }
    }

    /// The cap becomes `total`: permits are added, or taken out of
    /// circulation (those free at once, the rest as they come back).
    fn resize(&self, total: u32) {
        let mut limit = lock(&self.limit);
        if total > limit.total {
            let more = total - limit.total;
            let repaid = more.min(limit.debt);
            limit.debt -= repaid;
            self.permits.add_permits((more - repaid) as usize);
        } else if total < limit.total {
            let fewer = (limit.total - total) as usize;
            let forgotten = self.permits.forget_permits(fewer);
            let left = u32::try_from(fewer - forgotten).unwrap_or(u32::MAX);
            limit.debt = limit.debt.saturating_add(left);
        }
        limit.total = total;
    }
}
