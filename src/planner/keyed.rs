//! Keyed tasks, for callers that receive pushback as events.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hash;

use tokio::time::Instant;

use super::{Claim, Decision, Planner, Pushback, TaskState};

/// A second task with a key that is already running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a task with this key is already active")]
pub struct KeyInUse;

/// Keyed tasks over a [`Planner`]: one state entry per key, which exists
/// only between [`begin`](KeyedPlanner::begin) and
/// [`end`](KeyedPlanner::end). For callers that receive pushback as events
/// (queue consumers, other clients); the middleware keeps its task state on
/// its own stack and its key leases in a [`Store`](crate::store::Store).
#[derive(Debug)]
pub struct KeyedPlanner<K> {
    planner: Planner,
    tasks: HashMap<K, TaskState>,
}

impl<K: Hash + Eq> KeyedPlanner<K> {
    /// An empty set of tasks under `planner`.
    #[must_use]
    pub fn new(planner: Planner) -> Self {
        KeyedPlanner {
            planner,
            tasks: HashMap::new(),
        }
    }

    /// Starts the task `key` with its `deadline`; a key already running is
    /// refused.
    pub fn begin(&mut self, key: K, deadline: Instant) -> Result<(), KeyInUse> {
        match self.tasks.entry(key) {
            Entry::Occupied(_) => Err(KeyInUse),
            Entry::Vacant(v) => {
                v.insert(TaskState::new(deadline));
                Ok(())
            }
        }
    }

    /// [`Planner::claim`] for `key`; `None` if the key is not running.
    pub fn claim(&mut self, key: &K, now: Instant) -> Option<Claim> {
        let task = self.tasks.get_mut(key)?;
        Some(self.planner.claim(task, now))
    }

    /// [`Planner::plan`] for `key`; `None` if the key is not running. A
    /// second pushback for a task with a planned retry keeps the later time.
    pub fn plan(
        &mut self,
        key: &K,
        pushback: &Pushback,
        now: Instant,
        jitter_seed: u64,
    ) -> Option<Decision> {
        let task = self.tasks.get_mut(key)?;
        Some(self.planner.plan(task, pushback, now, jitter_seed))
    }

    /// The state of `key`, if running.
    #[must_use]
    pub fn get(&self, key: &K) -> Option<&TaskState> {
        self.tasks.get(key)
    }

    /// Ends the task `key`, freeing its entry.
    pub fn end(&mut self, key: &K) -> Option<TaskState> {
        let task = self.tasks.remove(key);
        crate::util::shrink_after_burst(&mut self.tasks);
        task
    }

    /// Number of running tasks.
    #[must_use]
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether no task is running.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}
