//! The vendors' scope rules, against their own documented examples.

mod discord;
mod github;
mod ietf;
mod props;

use http::{HeaderMap, HeaderValue};

/// Headers from `(name, value)` pairs, repeated names kept as field lines.
pub(super) fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for &(name, value) in pairs {
        map.append(name, HeaderValue::from_str(value).expect("a header value"));
    }
    map
}

/// `key` as a Structured Fields Byte Sequence (`:base64:`).
pub(super) fn byte_sequence(key: &[u8]) -> String {
    sfv::ItemSerializer::new().bare_item(key).finish()
}

/// Lowercase hex written independently of the code under test.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
