//! A worker's result line on stdout: tab-separated `name=value` fields after
//! [`RESULT`], written by the worker and read back by the row.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::outcome::ClientSide;

/// The first word of a worker's result line on stdout.
const RESULT: &str = "STORM_RESULT";

/// A label without the result line's separators.
fn clean(label: &str) -> String {
    label.replace(['\t', '\n', '\r', ';'], " ")
}

/// The worker's result line: tab-separated `name=value` fields.
pub(super) fn encode(side: &ClientSide, unfinished: u32, late: Duration) -> String {
    let join = |m: &mut dyn Iterator<Item = String>| m.collect::<Vec<_>>().join(";");
    format!(
        "{RESULT}\tok={}\tfailed={}\tunfinished={unfinished}\tlast_ok_us={}\tlate_us={}\tfailed_us={}\tattempts={}\tfailures={}",
        side.ok,
        side.failed,
        side.last_ok
            .map_or_else(|| "-".to_owned(), |d| d.as_micros().to_string()),
        late.as_micros(),
        side.failed_span.map_or_else(
            || "-".to_owned(),
            |(lo, hi)| format!("{}..{}", lo.as_micros(), hi.as_micros())
        ),
        join(&mut side.attempts.iter().map(|(k, v)| format!("{k}={v}"))),
        join(
            &mut side
                .reasons
                .iter()
                .map(|(k, v)| format!("{}={v}", clean(k)))
        ),
    )
}

/// What one worker reported.
#[derive(Debug, Default)]
pub(super) struct Report {
    pub(super) side: ClientSide,
    pub(super) unfinished: u32,
    pub(super) late: Duration,
}

pub(super) fn decode(stdout: &str) -> Option<Report> {
    let line = stdout
        .lines()
        .find(|l| l.split('\t').next() == Some(RESULT))?;
    let mut r = Report::default();
    let counts = |v: &str| -> Option<BTreeMap<String, u32>> {
        v.split(';')
            .filter(|s| !s.is_empty())
            .map(|s| {
                let (k, n) = s.rsplit_once('=')?;
                Some((k.to_owned(), n.parse().ok()?))
            })
            .collect()
    };
    for field in line.split('\t').skip(1) {
        let (name, value) = field.split_once('=')?;
        match name {
            "ok" => r.side.ok = value.parse().ok()?,
            "failed" => r.side.failed = value.parse().ok()?,
            "unfinished" => r.unfinished = value.parse().ok()?,
            "last_ok_us" if value == "-" => {}
            "last_ok_us" => r.side.last_ok = Some(Duration::from_micros(value.parse().ok()?)),
            "late_us" => r.late = Duration::from_micros(value.parse().ok()?),
            "failed_us" if value == "-" => {}
            "failed_us" => {
                let (lo, hi) = value.split_once("..")?;
                r.side.failed_span = Some((
                    Duration::from_micros(lo.parse().ok()?),
                    Duration::from_micros(hi.parse().ok()?),
                ));
            }
            "attempts" => {
                r.side.attempts = counts(value)?
                    .into_iter()
                    .map(|(k, v)| Some((k.parse().ok()?, v)))
                    .collect::<Option<_>>()?;
            }
            "failures" => r.side.reasons = counts(value)?,
            _ => {}
        }
    }
    Some(r)
}
