//! Small helpers the layers share: time and memory bounds. Depends on
//! nothing else in the crate, so every layer may use it.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// Gives memory back once a burst of entries is over: when a map holds
/// under a quarter of its capacity (and the capacity is not small), it
/// shrinks to twice its length. The hysteresis keeps this rare.
pub(crate) fn shrink_after_burst<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 64 && map.len() < map.capacity() / 4 {
        map.shrink_to(map.len() * 2);
    }
}

/// About 30 years ahead: the latest instant we ever compute.
pub(crate) fn far_future(now: Instant) -> Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    now.checked_add(THIRTY_YEARS).unwrap_or(now)
}

/// `d` in whole nanoseconds, saturating (for the stores' text forms).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
