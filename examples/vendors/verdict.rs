//! The bookkeeping the vendor examples share (`github`, `discord`,
//! `anthropic`, `shopify`, `stripe`): what their tasks got back
//! ([`Tally`]) and the contract's checks on what the server saw
//! ([`Verdict`]), which turn into the example's exit code. Included with
//! `#[path = "vendors/verdict.rs"] mod verdict;`: a plain module, not an
//! example of its own. Nothing here is needed to use the crate; copy the
//! client and its requests, not this.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use reqwest::Response;
use reqwest_backpressure::RetryReport;

/// What the tasks got back: how many answers of each status, the stop
/// codes the answers carried in their [`RetryReport`], and the errors by
/// code (the crate's, else `reqwest`).
#[derive(Debug, Default)]
pub struct Tally {
    statuses: BTreeMap<u16, usize>,
    stops: BTreeMap<&'static str, usize>,
    errors: BTreeMap<&'static str, usize>,
}

impl Tally {
    /// Counts what one task got back.
    pub fn add(&mut self, result: &reqwest_middleware::Result<Response>) {
        match result {
            Ok(response) => {
                *self.statuses.entry(response.status().as_u16()).or_default() += 1;
                let stop = response
                    .extensions()
                    .get::<RetryReport>()
                    .and_then(RetryReport::stop_reason);
                if let Some(reason) = stop {
                    *self.stops.entry(reason.code()).or_default() += 1;
                }
            }
            Err(e) => *self.errors.entry(error_code(e)).or_default() += 1,
        }
    }

    /// Answers returned with `status`.
    pub fn with(&self, status: u16) -> usize {
        self.statuses.get(&status).copied().unwrap_or(0)
    }

    /// Stop codes and errors, in one count (zero: every task ended with
    /// its answer, and none was stopped).
    pub fn stopped(&self) -> usize {
        self.stops.values().chain(self.errors.values()).sum()
    }

    /// `200 × 98, 429 × 2 (stops: deadline_exhausted × 2)`.
    pub fn line(&self) -> String {
        let list = |m: &mut dyn Iterator<Item = (String, usize)>| {
            m.map(|(k, n)| format!("{k} × {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut line = list(&mut self.statuses.iter().map(|(s, &n)| (s.to_string(), n)));
        if !self.stops.is_empty() {
            let stops = list(&mut self.stops.iter().map(|(c, &n)| ((*c).to_owned(), n)));
            line.push_str(&format!(" (stops: {stops})"));
        }
        if !self.errors.is_empty() {
            let errors = list(&mut self.errors.iter().map(|(c, &n)| ((*c).to_owned(), n)));
            line.push_str(&format!("; errors: {errors}"));
        }
        line
    }
}

/// The stable code of the crate's error, else `reqwest` (a transport
/// error).
fn error_code(e: &reqwest_middleware::Error) -> &'static str {
    match e {
        reqwest_middleware::Error::Middleware(e) => e
            .downcast_ref::<reqwest_backpressure::Error>()
            .map_or("middleware", reqwest_backpressure::Error::code),
        reqwest_middleware::Error::Reqwest(_) => "reqwest",
    }
}

/// The contract's checks on one run: each printed as `ok` or `BROKEN`
/// with what was measured; [`exit`](Self::exit) fails if one broke.
#[derive(Debug, Default)]
pub struct Verdict {
    checks: Vec<(bool, String)>,
}

impl Verdict {
    /// Notes a check: `holds`, described by `what` (the measure and the
    /// bound).
    pub fn check(&mut self, holds: bool, what: impl Into<String>) {
        self.checks.push((holds, what.into()));
    }

    /// Checks that `measured` is within `factor` × `ideal`.
    pub fn within(&mut self, what: &str, measured: Duration, ideal: Duration, factor: f64) {
        let ratio = measured.as_secs_f64() / ideal.as_secs_f64().max(f64::EPSILON);
        self.check(
            ratio <= factor,
            format!(
                "{what}: {:.2} s, {ratio:.2}× the ideal {:.2} s (at most {factor:.2}×)",
                measured.as_secs_f64(),
                ideal.as_secs_f64()
            ),
        );
    }

    /// Prints every check and returns the exit code: failure if one
    /// broke.
    pub fn exit(self) -> ExitCode {
        println!("contract:");
        for (holds, what) in &self.checks {
            println!("  {}  {what}", if *holds { "ok    " } else { "BROKEN" });
        }
        let broken = self.checks.iter().filter(|(holds, _)| !holds).count();
        if broken == 0 {
            println!("every check holds.");
            ExitCode::SUCCESS
        } else {
            println!("{broken} check(s) broken.");
            ExitCode::FAILURE
        }
    }
}

/// Seconds with two decimals, for the reports.
pub fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}
