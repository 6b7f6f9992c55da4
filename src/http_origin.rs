//! The origin of a URL (`scheme://host:port`), as logs and store keys name
//! it: the middleware names a request's origin, a task the origin that
//! answered it. Depends on nothing else in the crate.

/// Whether `url` has the origin `origin` (as [`origin_of`] writes it),
/// without building a string.
pub(crate) fn same_origin(origin: &str, url: &reqwest::Url) -> bool {
    let Some(rest) = origin
        .strip_prefix(url.scheme())
        .and_then(|r| r.strip_prefix("://"))
        .and_then(|r| r.strip_prefix(url.host_str().unwrap_or("")))
        .and_then(|r| r.strip_prefix(':'))
    else {
        return false;
    };
    let mut port = itoa::Buffer::new();
    rest == port.format(url.port_or_known_default().unwrap_or(0))
}

/// `scheme://host:port` of a URL: what logs and store keys may carry
/// (never a path's query, user info or fragment).
pub(crate) fn origin_of(url: &reqwest::Url) -> String {
    // Built by hand: this runs on every request, and `format!` costs more
    // than the rest of the success path's bookkeeping.
    let scheme = url.scheme();
    let host = url.host_str().unwrap_or("");
    let mut port = itoa::Buffer::new();
    let port = port.format(url.port_or_known_default().unwrap_or(0));
    let mut origin = String::with_capacity(scheme.len() + host.len() + 9);
    origin.push_str(scheme);
    origin.push_str("://");
    origin.push_str(host);
    origin.push(':');
    origin.push_str(port);
    origin
}

#[cfg(test)]
mod tests {
    #[test]
    fn another_origin_is_not_the_same() {
        let url = reqwest::Url::parse("http://h:8080/").expect("valid url");
        for other in [
            "http://h:80",
            "https://h:8080",
            "http://g:8080",
            "http://h:8080/",
            "http://h",
        ] {
            assert!(!super::same_origin(other, &url), "{other}");
        }
    }

    #[test]
    fn origin_is_scheme_host_port_only() {
        let cases = [
            (
                "https://user:secret@example.com/a?token=x#f",
                "https://example.com:443",
            ),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
            ("http://[::1]:1/", "http://[::1]:1"),
            ("http://h:65535", "http://h:65535"),
            ("http://h:0", "http://h:0"),
            ("http://h/", "http://h:80"),
        ];
        for (url, origin) in cases {
            let url = reqwest::Url::parse(url).expect("valid url");
            assert_eq!(super::origin_of(&url), origin);
            assert!(super::same_origin(origin, &url));
        }
    }
}
