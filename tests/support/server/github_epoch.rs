//! GitHub's primary limit as its REST API docs describe it, served with no
//! `Date` header, so a client measures the epoch-second reset against its
//! own clock (wiremock's server always sends `Date`: this one is a small
//! HTTP/1.1 server on std threads, one per connection).
//!
//! `quota` requests per window. A window opens at the first request at or
//! after the last one's reset, and resets on the whole epoch second
//! `ceil(opened + window)`: the reset it states is exact. Every answer
//! carries `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (Unix epoch
//! seconds) and `-resource: core`; a request over the quota gets `403` with
//! `x-ratelimit-remaining: 0` and the reset. Every request counts toward
//! its window, refused or not.
//!
//! Tasks are told apart by their `x-task` header; a task's send before the
//! reset its last `403` named is counted as premature. The server keeps
//! each window (when it opened, its reset, what arrived in it) on its own
//! clock, the system's: the client's, on the same machine.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::lock;

/// One window of the primary limit, on the server's clock.
#[derive(Debug, Clone, Copy)]
pub struct EpochWindow {
    /// When its first request arrived, since the Unix epoch.
    pub opened: Duration,
    /// The reset every answer in it stated, in epoch seconds.
    pub reset: u64,
    /// Requests that arrived in it.
    pub arrivals: u32,
    /// Of those, the ones refused (`403`, remaining 0).
    pub refused: u32,
    /// When the first refused one arrived, since the Unix epoch.
    pub first_refused: Option<Duration>,
}

/// What the server counted.
#[derive(Debug, Default)]
pub struct EpochState {
    pub quota: u32,
    pub window: Duration,
    pub requests: u64,
    pub oks: u64,
    pub refused: u64,
    /// Sends before the reset the task's last `403` named.
    pub premature: u64,
    pub windows: Vec<EpochWindow>,
    /// Per task: the reset its last `403` named.
    told: HashMap<u32, u64>,
}

impl EpochState {
    /// Judges a request of `task` arriving at `now` (since the Unix epoch):
    /// its status and the headers' `remaining` and `reset`.
    fn judge(&mut self, task: Option<u32>, now: Duration) -> (u16, u32, u64) {
        let open = self
            .windows
            .last()
            .is_some_and(|w| now < Duration::from_secs(w.reset));
        if !open {
            let end = now.saturating_add(self.window);
            let reset = end.as_secs() + u64::from(end.subsec_nanos() > 0);
            self.windows.push(EpochWindow {
                opened: now,
                reset,
                arrivals: 0,
                refused: 0,
                first_refused: None,
            });
        }
        self.requests += 1;
        if let Some(id) = task
            && let Some(&reset) = self.told.get(&id)
            && now < Duration::from_secs(reset)
        {
            self.premature += 1;
        }
        let quota = self.quota;
        let Some(window) = self.windows.last_mut() else {
            return (500, 0, 0);
        };
        window.arrivals += 1;
        if window.arrivals > quota {
            window.refused += 1;
            window.first_refused.get_or_insert(now);
            self.refused += 1;
            if let Some(id) = task {
                self.told.insert(id, window.reset);
            }
            return (403, 0, window.reset);
        }
        self.oks += 1;
        (200, quota - window.arrivals, window.reset)
    }
}

/// The server: [`EpochState`] behind a listener on a fresh loopback port.
pub struct GitHubEpochServer {
    port: u16,
    state: Arc<Mutex<EpochState>>,
    stop: Arc<AtomicBool>,
    pub uri: String,
}

impl GitHubEpochServer {
    /// `quota` requests per `window` (whole seconds).
    pub fn start(quota: u32, window: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let state = Arc::new(Mutex::new(EpochState {
            quota,
            window,
            ..EpochState::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let state = state.clone();
                    std::thread::spawn(move || serve(conn, &state));
                }
            });
        }
        let uri = format!("http://127.0.0.1:{port}");
        GitHubEpochServer {
            port,
            state,
            stop,
            uri,
        }
    }

    /// Stops accepting and returns what the server counted.
    pub fn finish(self) -> EpochState {
        std::mem::take(&mut *lock(&self.state))
    }
}

impl Drop for GitHubEpochServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Serves one keep-alive connection (GETs, no body) until the client
/// closes it.
fn serve(conn: TcpStream, state: &Mutex<EpochState>) {
    let _ = conn.set_nodelay(true);
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    loop {
        let mut task = None;
        let mut started = false;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let l = line.trim_end();
            if l.is_empty() {
                if started {
                    break;
                }
                continue;
            }
            started = true;
            if let Some((name, value)) = l.split_once(':')
                && name.trim().eq_ignore_ascii_case("x-task")
            {
                task = value.trim().parse::<u32>().ok();
            }
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let (status, remaining, reset) = lock(state).judge(task, now);
        let quota = lock(state).quota;
        let (reason, body) = match status {
            200 => ("OK", "[]"),
            _ => (
                "Forbidden",
                r#"{"message":"API rate limit exceeded for user ID 1."}"#,
            ),
        };
        let response = format!(
            "HTTP/1.1 {status} {reason}\r\n\
             x-ratelimit-limit: {quota}\r\n\
             x-ratelimit-remaining: {remaining}\r\n\
             x-ratelimit-used: {}\r\n\
             x-ratelimit-reset: {reset}\r\n\
             x-ratelimit-resource: core\r\n\
             content-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            quota - remaining,
            body.len(),
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
