//! Seeds the simulation failed on, pinned: each reruns its whole run and
//! asserts every rule.
