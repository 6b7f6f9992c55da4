//! A real `redis-server` for the Redis tests (`tests/all/redis.rs`) and the
//! storm benchmark's Redis row (`benches/storm.rs`): started from `PATH` on a
//! free loopback port, without persistence, in its own temp dir, and killed
//! (the dir removed) on drop; and [`Workers`], the guard over the worker
//! processes both of them start.
//!
//! Included by both with `#[path = …] mod redis_server;`: a plain module, not
//! a test target of its own (cargo only discovers `tests/*.rs` and
//! `tests/*/main.rs`).

use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A `redis-server` child on a loopback port, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    /// Arguments after the defaults (see [`RedisServer::start_with`]).
    extra: Vec<String>,
}

/// Why [`RedisServer::try_start`] could not start a server.
#[derive(Debug)]
pub enum StartError {
    /// There is no `redis-server` on `PATH`.
    NotFound,
    /// Anything else, described.
    Failed(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::NotFound => {
                f.write_str("redis-server not found: install it (apt-get install -y redis-server)")
            }
            StartError::Failed(why) => f.write_str(why),
        }
    }
}

/// A port nobody listens on right now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Whether a Redis server on loopback `port` answers `PING` with `PONG`
/// (within 500 ms).
pub fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

impl RedisServer {
    /// Starts a fresh server on a free port; panics if it cannot.
    pub fn start() -> Self {
        Self::try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a fresh server on a free port with `args` after the default
    /// arguments (e.g. `["--cluster-enabled", "yes"]`; relative paths are
    /// in the server's temp dir); panics if it cannot.
    pub fn start_with(args: &[&str]) -> Self {
        Self::try_start_with(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a fresh server on a free port (trying up to 5 of them), or
    /// says why it could not.
    pub fn try_start() -> Result<Self, StartError> {
        Self::try_start_with(&[])
    }

    /// [`try_start`](Self::try_start) with `args` after the default
    /// arguments.
    pub fn try_start_with(args: &[&str]) -> Result<Self, StartError> {
        for _ in 0..5 {
            let port = free_port()
                .map_err(|e| StartError::Failed(format!("no free loopback port: {e}")))?;
            let dir = std::env::temp_dir().join(format!(
                "reqwest-backpressure-redis-{}-{port}-{}",
                std::process::id(),
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos()
            ));
            std::fs::create_dir_all(&dir).map_err(|e| {
                StartError::Failed(format!("could not create a temp dir for redis-server: {e}"))
            })?;
            // Killed and its dir removed by drop from here on.
            let mut server = RedisServer {
                child: None,
                port,
                dir,
                extra: args.iter().map(|&a| a.to_owned()).collect(),
            };
            // Another process may have taken the port meanwhile: try another.
            if server.spawn()? {
                return Ok(server);
            }
        }
        Err(StartError::Failed(
            "redis-server did not start on any of 5 free ports".to_owned(),
        ))
    }

    /// Spawns the child and waits until it answers PING: `Ok(false)` if it
    /// exited first (e.g. the port was taken).
    fn spawn(&mut self) -> Result<bool, StartError> {
        let child = Command::new("redis-server")
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StartError::NotFound);
            }
            Err(e) => {
                return Err(StartError::Failed(format!(
                    "could not start redis-server: {e}"
                )));
            }
        };
        self.child = Some(child);
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            if ping(self.port) {
                return Ok(true);
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                eprintln!("redis-server on port {} exited: {status}", self.port);
                self.child = None;
                return Ok(false);
            }
            if Instant::now() >= give_up {
                return Err(StartError::Failed(format!(
                    "redis-server on port {} did not answer PING within 10 s",
                    self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether it runs (not stopped; a frozen server runs).
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (as a crash would: no shutdown, no save).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty; panics if it cannot.
    pub fn restart(&mut self) {
        self.stop();
        match self.spawn() {
            Ok(started) => assert!(started, "redis-server did not restart on its port"),
            Err(e) => panic!("{e}"),
        }
    }

    /// Freezes (`SIGSTOP`) or thaws (`SIGCONT`) the server: it keeps its
    /// connections open but answers nothing.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("redis-server running").id();
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }

    /// A plain synchronous connection, to look at what the store wrote.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("redis url")
            .get_connection()
            .expect("connect to redis-server")
    }

    /// A plain synchronous connection whose connecting and reads give up
    /// after a second (a frozen server does not hang the caller).
    pub fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        let limit = Duration::from_secs(1);
        let conn = redis::Client::open(self.url())?.get_connection_with_timeout(limit)?;
        conn.set_read_timeout(Some(limit))?;
        conn.set_write_timeout(Some(limit))?;
        Ok(conn)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL: a frozen (SIGSTOP) server dies too.
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Worker processes, killed when dropped if still running (a failed
/// assertion or a timeout must not leave workers behind).
pub struct Workers(pub Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
