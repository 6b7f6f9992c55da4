//! IETF: the partition key of a `RateLimit` field.

use http::HeaderMap;

use super::super::*;
use super::{byte_sequence, headers, hex};

#[test]
fn the_ietf_partition_is_the_first_well_formed_items_key_in_hex() {
    let read = |values: &[&str]| {
        let pairs: Vec<_> = values.iter().map(|v| ("ratelimit", *v)).collect();
        ietf_partition(&headers(&pairs))
    };
    // The draft's own examples.
    assert_eq!(
        read(&[r#""default";r=999;pk=:dHJpYWwxMjEzMjM=:"#]),
        Some(hex(b"trial121323"))
    );
    assert_eq!(
        read(&[r#""default";r=300000000;t=60;pk=:QXBwLTk5OQ==:"#]),
        Some(hex(b"App-999"))
    );
    assert_eq!(read(&[r#""default";r=50;t=30"#]), None);
    // The first item with a key, across field lines; tokens name policies too.
    assert_eq!(
        read(&[
            r#""burst";r=5;t=1"#,
            r#"daily;r=900;t=86000;pk=:QXBwLTk5OQ==:, "x";r=1;pk=:AAEC:"#
        ]),
        Some(hex(b"App-999"))
    );
    // An item the rate-limit reader skips gives no key, nor does a key
    // that is not a Byte Sequence, or is empty.
    assert_eq!(
        read(&[r#""nor";pk=:AAEC:, "s";r=1;pk="AAEC", "e";r=1;pk=::, "ok";r=1;pk=:AAEC:"#]),
        Some(hex(&[0, 1, 2]))
    );
    // Other shapes: nothing.
    assert_eq!(read(&["limit=100, remaining=50, reset=5"]), None);
    assert_eq!(read(&["\"a\";r=1;pk=:AAEC"]), None);
    assert_eq!(ietf_partition(&HeaderMap::new()), None);
    let many = vec![r#""p";r=1;pk=:AAEC:"#; MAX_POLICIES + 1].join(", ");
    assert_eq!(read(&[&many]), None);
}

#[test]
fn one_ietf_partition_key_has_one_text_however_its_base64_is_spelled() {
    // The parser takes padding as optional and trailing bits as given.
    let spellings = [":AQ==:", ":AQ:", ":AR==:"];
    for pk in spellings {
        let map = headers(&[("ratelimit", &format!("\"p\";r=1;pk={pk}"))]);
        assert_eq!(ietf_partition(&map), Some(hex(&[1])), "{pk}");
    }
}

#[test]
fn a_long_ietf_partition_key_fits_a_scope_and_stays_apart() {
    let mut a = vec![7u8; 40];
    let short = [9u8; 32];
    let map =
        |key: &[u8]| headers(&[("ratelimit", &format!("\"p\";r=1;pk={}", byte_sequence(key)))]);
    assert_eq!(ietf_partition(&map(&short)), Some(hex(&short)));
    let first = ietf_partition(&map(&a)).expect("a key");
    a[39] = 8;
    let second = ietf_partition(&map(&a)).expect("a key");
    assert!(first.len() <= MAX_SCOPE_LEN && second.len() <= MAX_SCOPE_LEN);
    assert_ne!(first, second);
    assert!(first.starts_with(&hex(&[7u8; 20])), "{first}");
}
