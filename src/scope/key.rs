//! How a limit is named: its origin, and its scope within the origin.
//!
//! A limit (a gate, a quota and a pace: one [`OriginState`](crate::origin::OriginState))
//! is kept under one string key: `scheme://host:port` for the origin's own
//! limit, and `scheme://host:port#scope` for the limit of one scope of it
//! (a GitHub resource, a Discord bucket, an IETF partition, a declared
//! scope). An origin never holds a `#` (the URL's fragment is never part of
//! it), so the first `#` is where the scope begins. Stores keep the key as
//! they get it; the Redis store keeps a scope's key in its origin's slot.

/// The longest scope name kept, in bytes: a longer one (a hostile bucket
/// name) is cut at a character boundary at or below it.
pub const MAX_SCOPE_LEN: usize = 64;

/// The key of `origin`'s limit in `scope` (`None`: the origin's own).
pub(crate) fn limit_key(origin: &str, scope: Option<&str>) -> String {
    match scope {
        None => origin.to_owned(),
        Some(scope) => {
            let scope = clean(scope);
            let mut key = String::with_capacity(origin.len() + 1 + scope.len());
            key.push_str(origin);
            key.push('#');
            key.push_str(&scope);
            key
        }
    }
}

/// The origin and the scope (`None`: the origin's own limit) of a limit's
/// key.
pub(crate) fn split(key: &str) -> (&str, Option<&str>) {
    match key.split_once('#') {
        Some((origin, scope)) => (origin, Some(scope)),
        None => (key, None),
    }
}

/// `scope` as a key carries it: printable ASCII but `#` and spaces (others
/// become `_`), at most [`MAX_SCOPE_LEN`] bytes: a longer one keeps its
/// head and a digest of the whole, so two long names never merge. Logs,
/// metrics labels and store keys may show it.
pub(crate) fn clean(scope: &str) -> String {
    // Whatever its length, the work is bounded.
    let cleaned: String = scope
        .chars()
        .take(4 * 1024)
        .map(|c| {
            if c.is_ascii_graphic() && c != '#' {
                c
            } else {
                '_'
            }
        })
        .collect();
    super::vendor::bounded(cleaned, MAX_SCOPE_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_key_splits_back_into_its_origin_and_scope() {
        let key = limit_key("https://api.github.com:443", Some("search"));
        assert_eq!(key, "https://api.github.com:443#search");
        assert_eq!(split(&key), ("https://api.github.com:443", Some("search")));
        let origin = limit_key("http://h:80", None);
        assert_eq!(split(&origin), ("http://h:80", None));
    }

    #[test]
    fn a_hostile_scope_name_is_cleaned_and_bounded() {
        let long = "é#x y\n".repeat(40);
        let key = limit_key("http://h:80", Some(&long));
        let (origin, scope) = split(&key);
        assert_eq!(origin, "http://h:80");
        let scope = scope.expect("a scope");
        assert!(scope.len() <= MAX_SCOPE_LEN, "{}", scope.len());
        assert!(scope.chars().all(|c| c.is_ascii_graphic() && c != '#'));
        // Two long names that differ only past the cut stay apart.
        let (a, b) = ("x".repeat(100) + "a", "x".repeat(100) + "b");
        assert_ne!(clean(&a), clean(&b));
        assert!(clean(&a).len() <= MAX_SCOPE_LEN);
        // A scope with `#` inside still splits at the origin's end.
        assert_eq!(split(&limit_key("http://h:80", Some("a#b"))).1, Some("a_b"));
    }
}
