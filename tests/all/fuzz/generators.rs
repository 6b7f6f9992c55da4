//! Structured, seeded generators: valid values, near misses of each grammar,
//! numbers at the overflow boundaries, odd whitespace, non-ASCII and
//! invalid UTF-8 bytes, 4 KiB values, and plain random bytes.

use super::reference::{
    FMTS, Fmt, LONG_DAYS, MONTHS, SHORT_DAYS, days_since_epoch, month_len, weekday,
};

/// Digit strings where integer types and `Duration` overflow.
const BOUNDARY_DIGITS: &[&str] = &[
    "0",
    "1",
    "9",
    "10",
    "127",
    "128",
    "255",
    "256",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551614",
    "18446744073709551615",
    "18446744073709551616",
    "18446744073709551615999",
    "18446744073709551616000",
    "18446744073709551615999999999",
    "18446744073709551616000000000",
    "18446744073709551615999999",
    "18446744073709551616000000",
    "18446744073709551615.999999999",
    "340282366920938463463374607431768211455",
    "340282366920938463463374607431768211456",
    "999999999999999",
    "1000000000000000",
    "999999999999",
    "9999999999999",
    "253402300799",
    "253402300800",
    "1700000000",
    "784111777",
    "00000000000000000000000000000000000000000000000000000000000000000000000001",
];

/// Bytes a mutation inserts: grammar punctuation, whitespace of every kind,
/// pieces of UTF-8 (µ, μ, NBSP) and bytes that are never valid UTF-8.
const ODD_BYTES: &[u8] = b"0123456789 \t:.,;=-+\"\\()?*@%/_aAzZtTsmhnuGMdx\r\n\x00\x0b\x0c\x7f\x80\xa0\xb5\xbc\xc2\xce\xe2\xff";

const GO_UNITS: &[&str] = &["h", "m", "s", "ms", "us", "\u{b5}s", "\u{3bc}s", "ns"];
const BAD_GO_UNITS: &[&str] = &[
    "",
    "d",
    "w",
    "y",
    "S",
    "M",
    "H",
    "Ms",
    "MS",
    "sec",
    "min",
    "hr",
    "u",
    "n",
    "\u{b5}",
    "\u{3bc}",
    "µS",
    "\u{2009}s",
    " s",
    "s ",
    "ss",
    "mss",
];

pub struct Gen {
    pub rng: fastrand::Rng,
}

impl Gen {
    pub fn new(seed: u64) -> Self {
        Gen {
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.rng.u32(0..100) < percent
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.usize(0..xs.len())]
    }

    /// Optional whitespace of many kinds: OWS, and some that is not.
    pub fn ws(&mut self) -> &'static [u8] {
        self.pick(&[
            b"".as_slice(),
            b"",
            b" ",
            b"\t",
            b"  ",
            b" \t ",
            b"\t\t",
            b"\r",
            b"\n",
            b"\x0b",
            b"\x0c",
            b"\xc2\xa0",
            b"\xe3\x80\x80",
        ])
    }

    pub fn random_bytes(&mut self, max: usize) -> Vec<u8> {
        let len = self.rng.usize(0..=max);
        let printable = self.chance(50);
        (0..len)
            .map(|_| {
                if printable {
                    self.rng.u8(0x20..0x7f)
                } else {
                    self.rng.u8(..)
                }
            })
            .collect()
    }

    /// One to three edits: a byte changed, inserted, deleted or doubled, two
    /// bytes swapped, a case flipped, the value cut short.
    pub fn mutate(&mut self, v: &mut Vec<u8>) {
        for _ in 0..self.rng.usize(1..=3) {
            let at = self.rng.usize(0..=v.len());
            let byte = if self.chance(80) {
                self.pick(ODD_BYTES)
            } else {
                self.rng.u8(..)
            };
            match self.rng.u8(0..7) {
                0 if at < v.len() => v[at] = byte,
                1 => v.insert(at, byte),
                2 if at < v.len() => {
                    v.remove(at);
                }
                3 if at + 1 < v.len() => v.swap(at, at + 1),
                4 if at < v.len() => {
                    let b = v[at];
                    v.insert(at, b);
                }
                5 if at < v.len() => v[at] ^= 0x20,
                6 => v.truncate(at),
                _ => v.push(byte),
            }
        }
    }

    /// What every family does last with a value: usually nothing, else
    /// wrap it in whitespace, mutate it, make it 4 KiB, or replace it with
    /// random bytes.
    pub fn finish(&mut self, mut v: Vec<u8>) -> Vec<u8> {
        match self.rng.u8(0..100) {
            0..=54 => {}
            55..=69 => {
                let (a, b) = (self.ws(), self.ws());
                v.splice(0..0, a.iter().copied());
                v.extend_from_slice(b);
            }
            70..=89 => self.mutate(&mut v),
            90..=92 => {
                // A 4 KiB value: the valid value repeated, or padded.
                let pad = self.pick(b"0 \ta");
                if self.chance(50) && !v.is_empty() {
                    let unit = v.clone();
                    while v.len() < 4096 {
                        v.extend_from_slice(&unit);
                    }
                } else {
                    let mut p = vec![pad; 4096usize.saturating_sub(v.len())];
                    p.extend_from_slice(&v);
                    v = p;
                }
            }
            _ => v = self.random_bytes(64),
        }
        v
    }

    /// A digit string: small, at an overflow boundary, or 18–30 digits.
    pub fn digits(&mut self) -> String {
        match self.rng.u8(0..4) {
            0 => self.rng.u64(0..100_000).to_string(),
            1 => self.pick(BOUNDARY_DIGITS).to_string(),
            2 => {
                let n = self.rng.usize(18..=30);
                let mut s: String = (0..n).map(|_| self.rng.digit(10)).collect();
                if self.chance(30) {
                    s.insert_str(0, &"0".repeat(self.rng.usize(1..110)));
                }
                s
            }
            _ => {
                let n = self.rng.usize(1..=20);
                (0..n).map(|_| self.rng.digit(10)).collect()
            }
        }
    }

    /// `1*DIGIT [ "." 1*DIGIT ]` and its near misses.
    pub fn decimal(&mut self) -> String {
        let mut s = if self.chance(5) {
            String::new()
        } else {
            self.digits()
        };
        if s.contains('.') {
            return s;
        }
        if self.chance(50) {
            s.push('.');
            let k = self.pick(&[0, 1, 2, 3, 6, 8, 9, 9, 10, 11, 20]);
            s.extend((0..k).map(|_| self.rng.digit(10)));
        }
        match self.rng.u8(0..30) {
            0 => s.insert(0, '-'),
            1 => s.insert(0, '+'),
            2 => s.push_str("e3"),
            3 => s.insert(0, '.'),
            4 => s = s.replace('1', "\u{661}"),
            5 => s.push('.'),
            _ => {}
        }
        s
    }

    // ------------------------------------------------------ Retry-After ----

    fn date_fields(&mut self) -> (i64, i64, i64, i64, i64, i64) {
        let y = match self.rng.u8(0..10) {
            0 => self.pick(&[
                1900, 1969, 1970, 1999, 2000, 2038, 2069, 2070, 2100, 2400, 9999,
            ]),
            1 => self.rng.i64(0..=9999),
            _ => self.rng.i64(1970..=2100),
        };
        let m = if self.chance(3) {
            self.pick(&[0, 13])
        } else {
            self.rng.i64(1..=12)
        };
        let d = if self.chance(5) {
            self.pick(&[0, 29, 30, 31, 32])
        } else if (1..=12).contains(&m) {
            self.rng.i64(1..=month_len(y, m))
        } else {
            1
        };
        let h = if self.chance(3) {
            24
        } else {
            self.rng.i64(0..24)
        };
        let mi = if self.chance(3) {
            60
        } else {
            self.rng.i64(0..60)
        };
        let s = if self.chance(4) {
            60
        } else {
            self.rng.i64(0..60)
        };
        (y, m, d, h, mi, s)
    }

    /// An HTTP-date in one of the three formats, with a fair share of near
    /// misses: wrong weekday, impossible day, hour 24, second 60, two-digit
    /// years, case changes, missing GMT, extra spaces.
    pub fn http_date(&mut self) -> String {
        let (y, m, d, h, mi, s) = self.date_fields();
        let valid_day = (1..=12).contains(&m) && d >= 1 && d <= month_len(y, m);
        let mut wd = if valid_day {
            weekday(days_since_epoch(y, m, d))
        } else {
            self.rng.usize(0..7)
        };
        if self.chance(5) {
            wd = (wd + self.rng.usize(1..7)) % 7;
        }
        let mon = MONTHS[((m - 1).clamp(0, 11)) as usize];
        let time = format!("{h:02}:{mi:02}:{s:02}");
        let mut out = match self.rng.u8(0..3) {
            0 => format!("{}, {d:02} {mon} {y:04} {time} GMT", SHORT_DAYS[wd]),
            1 => format!("{}, {d:02}-{mon}-{:02} {time} GMT", LONG_DAYS[wd], y % 100),
            _ => {
                let day = if self.chance(80) {
                    format!("{d:>2}")
                } else {
                    format!("{d:02}")
                };
                format!("{} {mon} {day} {time} {y:04}", SHORT_DAYS[wd])
            }
        };
        match self.rng.u8(0..40) {
            0 => out = out.to_lowercase(),
            1 => out = out.to_uppercase(),
            2 => out = out.replace(" GMT", ""),
            3 => out = out.replace("GMT", "UTC"),
            4 => out = out.replace(' ', "  "),
            5 => out = out.replacen(' ', "\t", 1),
            6 => out = out.replace(", ", ","),
            7 => out = out.replace(&format!("{y:04}"), &format!("{:02}", y % 100)),
            8 => out = out.replace(&format!("-{:02} ", y % 100), &format!("-{y:04} ")),
            9 => out = out.replacen(&format!("{d:02}"), &format!("{d}"), 1),
            10 => out = out.replacen(SHORT_DAYS[wd], LONG_DAYS[wd], 1),
            11 => out = out.replacen(mon, &mon.to_lowercase(), 1),
            12 => {
                // One separator replaced: the byte between year and hour.
                let mut b = out.into_bytes();
                if let Some(p) = b.iter().rposition(|&c| c == b' ') {
                    let p = b[..p].iter().rposition(|&c| c == b' ').unwrap_or(p);
                    b[p] = self.pick(b"x0-:T/,");
                }
                out = String::from_utf8_lossy(&b).into_owned();
            }
            13 => out.push_str(" +0000"),
            _ => {}
        }
        out
    }

    pub fn retry_after(&mut self) -> Vec<u8> {
        let v: Vec<u8> = match self.rng.u8(0..10) {
            0..=3 => self.http_date().into_bytes(),
            4 | 5 => self.digits().into_bytes(),
            6 => self.decimal().into_bytes(),
            7 => {
                // Leading zeros up to and across the 128-byte limit.
                let n = self.rng.usize(120..=132);
                let tail = self.digits();
                let mut s = "0".repeat(n.saturating_sub(tail.len()));
                s.push_str(&tail);
                s.into_bytes()
            }
            8 => {
                let mut v = self.http_date().into_bytes();
                self.mutate(&mut v);
                v
            }
            _ => self.random_bytes(40),
        };
        self.finish(v)
    }

    // ------------------------------------------------------- reset values ----

    pub fn go_duration(&mut self) -> String {
        let mut s = String::new();
        if self.chance(20) {
            // As Go's Duration.String() writes it.
            let total = self.rng.u64(..) >> self.rng.u32(0..64);
            let (h, m, sec, frac) = (
                total / 3_600_000_000_000,
                total / 60_000_000_000 % 60,
                total / 1_000_000_000 % 60,
                total % 1_000_000_000,
            );
            if total < 1_000_000_000 {
                return format!("{}{}", total / 1000, self.pick(&["\u{b5}s", "us"]));
            }
            if h > 0 {
                s.push_str(&format!("{h}h"));
            }
            if h > 0 || m > 0 {
                s.push_str(&format!("{m}m"));
            }
            let frac = format!("{frac:09}");
            let frac = frac.trim_end_matches('0');
            return if frac.is_empty() {
                format!("{s}{sec}s")
            } else {
                format!("{s}{sec}.{frac}s")
            };
        }
        for _ in 0..self.rng.usize(1..=4) {
            let n = if self.chance(70) {
                self.rng.u64(0..1000).to_string()
            } else {
                self.decimal()
            };
            s.push_str(&n);
            let unit = if self.chance(90) {
                self.pick(GO_UNITS)
            } else {
                self.pick(BAD_GO_UNITS)
            };
            s.push_str(unit);
        }
        match self.rng.u8(0..25) {
            0 => s.insert(0, '-'),
            1 => s.insert(0, '+'),
            2 => s = self.decimal(),
            3 => s.insert(0, '.'),
            _ => {}
        }
        s
    }

    pub fn rfc3339(&mut self) -> String {
        let (y, m, d, h, mi, s) = self.date_fields();
        let t = self.pick(&['T', 'T', 't', ' ', '_']);
        let mut out = format!("{y:04}-{m:02}-{d:02}{t}{h:02}:{mi:02}:{s:02}");
        if self.chance(50) {
            let k = self.pick(&[0, 1, 3, 6, 9, 9, 10]);
            out.push('.');
            out.extend((0..k).map(|_| self.rng.digit(10)));
        }
        let oh = if self.chance(5) {
            24
        } else {
            self.rng.u8(0..24)
        };
        let om = if self.chance(5) {
            60
        } else {
            self.rng.u8(0..60)
        };
        let sign = self.pick(&['+', '-', '\u{2212}']);
        match self.rng.u8(0..10) {
            0..=3 => out.push(self.pick(&['Z', 'z'])),
            4..=7 => out.push_str(&format!("{sign}{oh:02}:{om:02}")),
            8 => out.push_str(&format!("{sign}{oh:02}{om:02}")),
            _ => out.push_str(self.pick(&["", "+00", "GMT", " Z", "Z "])),
        }
        if self.chance(3) {
            out.replace_range(0..4, &format!("{:05}", y));
        }
        out
    }

    /// A value for `fmt`, or, one time in eight, a value of another format.
    pub fn reset(&mut self, fmt: Fmt) -> Vec<u8> {
        let fmt = if self.chance(12) {
            self.pick(&FMTS)
        } else {
            fmt
        };
        let v = match fmt {
            Fmt::Seconds | Fmt::Millis | Fmt::EpochSeconds => self.decimal(),
            Fmt::GoDuration => self.go_duration(),
            Fmt::Rfc3339 => self.rfc3339(),
        };
        self.finish(v.into_bytes())
    }

    // -------------------------------------------------- Structured Fields ----

    fn sf_integer(&mut self) -> String {
        match self.rng.u8(0..6) {
            0 => self
                .pick(&[
                    "0",
                    "-0",
                    "-1",
                    "999999999999999",
                    "1000000000000000",
                    "-999999999999999",
                ])
                .into(),
            1 => self.digits(),
            _ => self.rng.u64(0..100_000).to_string(),
        }
    }

    fn sf_string(&mut self) -> String {
        let mut s = String::from("\"");
        for _ in 0..self.rng.usize(0..8) {
            match self.rng.u8(0..12) {
                0 => s.push_str("\\\""),
                1 => s.push_str("\\\\"),
                2 => s.push_str(self.pick(&["\\a", "\\", "\"", "\t", "é"])),
                _ => s.push(char::from(self.rng.u8(0x20..0x7f)).to_ascii_lowercase()),
            }
        }
        if self.chance(95) {
            s.push('"');
        }
        s
    }

    fn sf_bare(&mut self) -> String {
        match self.rng.u8(0..14) {
            0..=2 => self.sf_integer(),
            3 => format!(
                "{}.{}",
                self.rng.u64(0..10_000_000_000_000),
                "123456"[..self.rng.usize(0..5)].to_owned()
            ),
            4 | 5 => self.sf_string(),
            6 | 7 => self
                .pick(&[
                    "burst",
                    "daily",
                    "a",
                    "*x",
                    "Tok/en:1",
                    "x!#$&'*+-.^_`|~",
                    "default",
                ])
                .into(),
            8 => self.pick(&["?1", "?0", "?2", "?"]).into(),
            9 => self
                .pick(&[
                    ":aGVsbG8=:",
                    "::",
                    ":aGk=:",
                    ":aGk:",
                    ":a:",
                    ":a!b:",
                    ":aGVsbG8=",
                ])
                .into(),
            10 => format!(
                "@{}",
                self.pick(&["1659578233", "-1", "1.5", "", "999999999999999"])
            ),
            11 => self
                .pick(&[
                    "%\"caf%c3%a9\"",
                    "%\"x\"",
                    "%\"%C3%A9\"",
                    "%\"%c3\"",
                    "%x",
                    "%\"a%2\"",
                ])
                .into(),
            12 => self.pick(&["", "-", "é", "(", "Z", "_a"]).into(),
            _ => self.decimal(),
        }
    }

    fn sf_params(&mut self) -> String {
        let mut s = String::new();
        for _ in 0..self.rng.usize(0..4) {
            s.push(';');
            if self.chance(10) {
                s.push(' ');
            }
            let key = self.pick(&[
                "r", "r", "t", "t", "q", "w", "pk", "R", "*k", "1x", "r-t", "",
            ]);
            s.push_str(key);
            if self.chance(85) {
                s.push('=');
                let v = if self.chance(70) {
                    self.sf_integer()
                } else {
                    self.sf_bare()
                };
                s.push_str(&v);
            }
        }
        s
    }

    fn sf_member(&mut self) -> String {
        if self.chance(5) {
            let mut s = String::from("(");
            for i in 0..self.rng.usize(0..3) {
                if i > 0 {
                    s.push(' ');
                }
                let b = self.sf_bare();
                s.push_str(&b);
            }
            s.push(')');
            let p = self.sf_params();
            return s + &p;
        }
        let b = if self.chance(60) {
            if self.chance(50) {
                format!("\"{}\"", self.pick(&["burst", "daily", "", "a b"]))
            } else {
                self.pick(&["burst", "daily", "p1"]).into()
            }
        } else {
            self.sf_bare()
        };
        let p = if self.chance(60) {
            let mut p = format!(";r={}", self.sf_integer());
            if self.chance(70) {
                p.push_str(&format!(";t={}", self.sf_integer()));
            }
            if self.chance(20) {
                p += &self.sf_params();
            }
            p
        } else {
            self.sf_params()
        };
        b + &p
    }

    fn sf_separator(&mut self) -> &'static str {
        self.pick(&[", ", ", ", ",", " , ", ",\t", "\t,", ",  ", ";", " ", ",,"])
    }

    /// A `RateLimit` value: a draft-10 List, a draft-07 Dictionary, or
    /// something close to either.
    pub fn ratelimit(&mut self) -> Vec<u8> {
        let mut s = String::new();
        if self.chance(10) {
            s.push_str(self.pick(&[" ", "  ", "\t"]));
        }
        if self.chance(15) {
            // Well-formed policies only, around the 16-policy limit.
            let n = self.pick(&[1, 2, 15, 16, 16, 17]);
            for i in 0..n {
                if i > 0 {
                    s.push_str(", ");
                }
                s.push_str(&format!("\"p{i}\";r={}", self.rng.u8(0..3)));
                if self.chance(80) {
                    s.push_str(&format!(";t={}", self.rng.u32(0..100_000)));
                }
            }
        } else if self.chance(25) {
            let mut keys = vec!["limit", "remaining", "reset"];
            if self.chance(30) {
                keys.push(self.pick(&["policy", "limit", "reset", "x", "Remaining"]));
            }
            if self.chance(20) {
                keys.remove(self.rng.usize(0..keys.len()));
            }
            self.rng.shuffle(&mut keys);
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    let sep = self.sf_separator();
                    s.push_str(sep);
                }
                s.push_str(k);
                if self.chance(95) {
                    s.push('=');
                    let v = if self.chance(80) {
                        self.sf_integer()
                    } else {
                        self.sf_member()
                    };
                    s.push_str(&v);
                }
                if self.chance(10) {
                    s += &self.sf_params();
                }
            }
        } else {
            let n = self.pick(&[0, 1, 1, 2, 2, 3, 4, 8, 15, 16, 17, 20]);
            for i in 0..n {
                if i > 0 {
                    let sep = if self.chance(95) {
                        ", "
                    } else {
                        self.sf_separator()
                    };
                    s.push_str(sep);
                }
                let m = self.sf_member();
                s.push_str(&m);
            }
        }
        if self.chance(5) {
            s.push_str(self.pick(&[",", " ", "\t", ", "]));
        }
        let v = s.into_bytes();
        if self.chance(60) { v } else { self.finish(v) }
    }

    /// A draft-06 `RateLimit-Remaining` / `RateLimit-Reset` value.
    pub fn sf_integer_field(&mut self) -> Vec<u8> {
        let mut s = if self.chance(80) {
            self.sf_integer()
        } else {
            self.sf_bare()
        };
        if self.chance(15) {
            s += &self.sf_params();
        }
        self.finish(s.into_bytes())
    }

    // -------------------------------------------------- Idempotency-Key ----

    pub fn key(&mut self) -> String {
        match self.rng.u8(0..10) {
            0 => String::new(),
            1 => format!("order-{}", self.rng.u64(..)),
            2 => "k".repeat(self.rng.usize(1..5000)),
            _ => (0..self.rng.usize(1..24))
                .map(|_| match self.rng.u8(0..20) {
                    0 => '"',
                    1 => '\\',
                    2 => ' ',
                    3 => '\t',
                    4 => self.pick(&['é', 'к', '\u{0}', '\u{7f}', '\u{a0}', '😀']),
                    _ => char::from(self.rng.u8(0x21..0x7f)),
                })
                .collect(),
        }
    }

    /// An `Idempotency-Key` header value: an sf-string, a bare key, or a
    /// near miss of either (unbalanced quotes, bad escapes, bytes after
    /// the closing quote).
    pub fn idempotency_header(&mut self) -> Vec<u8> {
        let key = self.key();
        let mut quoted = String::from("\"");
        for c in key.chars() {
            if matches!(c, '"' | '\\') && self.chance(97) {
                quoted.push('\\');
            }
            quoted.push(c);
        }
        quoted.push('"');
        let v = match self.rng.u8(0..10) {
            0..=3 => quoted,
            4 | 5 => key,
            6 => quoted[..quoted.len() - 1].to_owned(),
            7 => format!("{quoted}{}", self.pick(&["x", "\"", ";a=1", " ", "\\"])),
            8 => format!("\"{}\\{}\"", key, self.pick(&["a", "", "n", "\\\\"])),
            _ => format!("{}{key}", self.pick(&["\"", "'", "\\\"", "\"\""])),
        };
        self.finish(v.into_bytes())
    }
}
