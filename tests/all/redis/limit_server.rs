//! The multi-process test's rate-limited server: the shared fixed-window
//! limiter behind a small std-thread HTTP/1.1 server that holds every request
//! in flight for a while and tracks requests in flight per `Idempotency-Key`.

use super::support::*;

/// Requests admitted per one-second window by [`LimitServer`].
pub(super) const CAP: u32 = 8;

/// How long the server holds each request (it is in flight meanwhile).
pub(super) const HOLD: Duration = Duration::from_millis(25);

/// Time a gate may take to reach every process: a 429 is received, recorded
/// in Redis, and requests admitted just before are still on the wire.
pub(super) const PROPAGATION: Duration = Duration::from_millis(250);

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) worker: String,
    pub(super) task: String,
    pub(super) key: String,
    pub(super) arrived: Instant,
    /// When the server started writing the answer (the request was in
    /// flight from `arrived` to here).
    pub(super) answered: Instant,
    /// For a 429: the earliest time its Retry-After allowed a retry,
    /// measured from `answered`.
    pub(super) told: Option<Instant>,
}

pub(super) struct LimitLog {
    /// The shared fixed-window limiter, its windows counted from the
    /// server's start.
    pub(super) limit: ServerState,
    in_flight: HashMap<String, u32>,
    /// Requests that arrived while another with the same key was in flight.
    pub(super) overlaps: Vec<String>,
    pub(super) seen: Vec<Seen>,
}

/// A small HTTP/1.1 server (std threads, one per connection) that admits,
/// through the shared limiter, [`CAP`] requests per one-second window and answers the rest `429` with a
/// whole-second `Retry-After` reaching the next window. It tracks requests in
/// flight per `Idempotency-Key`.
pub(super) struct LimitServer {
    pub(super) port: u16,
    pub(super) log: Arc<Mutex<LimitLog>>,
    pub(super) stop: Arc<AtomicBool>,
}

impl LimitServer {
    pub(super) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let start = Instant::now();
        let log = Arc::new(Mutex::new(LimitLog {
            limit: ServerState::starting_at(Shape::Window, CAP, start),
            in_flight: HashMap::new(),
            overlaps: Vec::new(),
            seen: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let log = Arc::clone(&log);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let log = Arc::clone(&log);
                    std::thread::spawn(move || serve(conn, &log));
                }
            });
        }
        LimitServer { port, log, stop }
    }

    pub(super) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for LimitServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Serves one keep-alive connection until the client closes it.
pub(super) fn serve(conn: TcpStream, log: &Mutex<LimitLog>) {
    let _ = conn.set_nodelay(true);
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    loop {
        let mut headers = HashMap::new();
        let mut line = String::new();
        // Request line.
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.trim().is_empty() {
            continue;
        }
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((name, value)) = l.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
        let len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let arrived = Instant::now();
        let header = |name: &str| headers.get(name).cloned().unwrap_or_default();
        let key = header("idempotency-key");
        let retry_after = {
            let mut log = log.lock().unwrap();
            let n = log.in_flight.entry(key.clone()).or_default();
            *n += 1;
            if *n > 1 {
                log.overlaps.push(key.clone());
            }
            // Whole seconds, reaching at least the next window.
            log.limit.judge(None, arrived).err()
        };
        std::thread::sleep(HOLD);
        let answered = Instant::now();
        {
            let mut log = log.lock().unwrap();
            if let Some(n) = log.in_flight.get_mut(&key) {
                *n -= 1;
            }
            log.seen.push(Seen {
                worker: header("x-worker"),
                task: header("x-task"),
                key,
                arrived,
                answered,
                told: retry_after.map(|s| answered + Duration::from_secs(s)),
            });
        }
        let response = match retry_after {
            None => "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_owned(),
            Some(s) => format!(
                "HTTP/1.1 429 Too Many Requests\r\nretry-after: {s}\r\ncontent-length: 0\r\n\r\n"
            ),
        };
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
