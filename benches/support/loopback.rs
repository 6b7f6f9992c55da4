//! What the loopback benches (`overhead`, `first_contact`) share: the
//! body every answer carries, a local server answering every `GET` at
//! once with it, on a runtime of its own, and the median they report.

use tokio::runtime::Runtime;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The body every answer carries.
pub const BODY: &str = "ok: a small body of a few dozen bytes\n";

/// Whether this is a full run: `cargo bench` passes `--bench`; `cargo test
/// --benches` does not, and then every part runs briefly.
pub fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// A multi-threaded runtime, a server on it answering every `GET` with
/// `200` and [`BODY`] (recording nothing), and the URL the benches get.
pub fn runtime_and_server() -> (Runtime, MockServer, String) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt.block_on(async {
        let server = MockServer::builder()
            .disable_request_recording()
            .start()
            .await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_string(BODY))
            .mount(&server)
            .await;
        server
    });
    let url = format!("{}/item", server.uri());
    (rt, server, url)
}

/// The median of `v` (sorted in place; the mean of the middle two when
/// its length is even).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}
