//! Deviations of the parsers from their specs that the fuzz harness
//! (`fuzz/`) found, each fixed: these tests state the conforming answer
//! (they failed before the fix).

use std::time::{Duration, UNIX_EPOCH};

use reqwest_backpressure::{RetryAfter, parse_retry_after};

/// Label `rfc850-separator`. RFC 9110 §5.6.7: `date2 SP time-of-day`; any other byte there is not an
/// HTTP-date, but httpdate 1.0.3 never looks at it.
#[test]
fn rfc850_date_needs_sp_between_year_and_hour() {
    for v in [
        "Sunday, 06-Nov-94x08:49:37 GMT",
        "Sunday, 06-Nov-94T08:49:37 GMT",
        "Sunday, 06-Nov-94:08:49:37 GMT",
    ] {
        assert!(parse_retry_after(v).is_err(), "{v:?} accepted");
    }
}

/// Label `leap-second`. RFC 9110 §5.6.7: `time-of-day` runs to 23:59:60 (a leap second).
#[test]
fn http_date_accepts_a_leap_second() {
    assert_eq!(
        parse_retry_after("Sat, 31 Dec 2016 23:59:60 GMT"),
        Ok(RetryAfter::At(
            UNIX_EPOCH + Duration::from_secs(1_483_228_800)
        ))
    );
}
