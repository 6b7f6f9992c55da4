//! A TCP proxy on loopback that delays every reply: what the upstream
//! server sends reaches the client `delay` later (in order); what the
//! client sends is forwarded at once. A shared store behind it answers
//! each round trip `delay` late, so a caller can be dropped after the
//! store applied its update and before the answer came back.

#![allow(dead_code)]

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A running proxy; it stops accepting when dropped.
pub struct DelayProxy {
    addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    /// Proxies a new loopback port to `upstream`, delaying replies by
    /// `delay`.
    pub async fn start(upstream: SocketAddr, delay: Duration) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        let _ = relay(client, server, delay).await;
                    }
                });
            }
        });
        Ok(DelayProxy { addr, accept })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies `client`'s bytes to `server` at once, and `server`'s back
/// `delay` after they came, until either side closes.
async fn relay(client: TcpStream, server: TcpStream, delay: Duration) -> io::Result<()> {
    let (client, server) = (Arc::new(client), Arc::new(server));
    let (late, mut due) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let upstream = {
        let (client, server) = (Arc::clone(&client), Arc::clone(&server));
        tokio::spawn(async move { copy(&client, &server).await })
    };
    let replies = {
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                server.readable().await?;
                match server.try_read(&mut buf) {
                    Ok(0) => return Ok::<(), io::Error>(()),
                    Ok(n) => {
                        if late
                            .send((Instant::now() + delay, buf[..n].to_vec()))
                            .is_err()
                        {
                            return Ok(());
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
        })
    };
    while let Some((at, bytes)) = due.recv().await {
        tokio::time::sleep_until(at).await;
        write_all(&client, &bytes).await?;
    }
    upstream.abort();
    replies.abort();
    Ok(())
}

/// Copies what `from` sends to `to` until `from` closes.
async fn copy(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        from.readable().await?;
        match from.try_read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => write_all(to, &buf[..n]).await?,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

async fn write_all(to: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        to.writable().await?;
        match to.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
