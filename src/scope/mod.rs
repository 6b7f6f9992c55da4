//! Scopes: the parts of an origin's traffic that a limit of its own
//! covers (a GitHub resource, a Discord bucket, an IETF partition, a
//! declared scope), and the set of limits a request falls under.

pub(crate) mod key;
pub(crate) mod vendor;

pub use key::MAX_SCOPE_LEN;
