//! A wire tap: a middleware placed innermost in a client (after ours and
//! after any reqwest-retry) that logs each send leaving for the network
//! and each answer coming back, in the order the client saw them.
//!
//! What a client *knew* when it sent is a question of that order: a
//! request already in flight when the server said "spent" was sent in
//! ignorance, one sent after the client heard it was not. The server
//! cannot tell the two apart; the tap can. Its times are the monotonic
//! clock the servers' arrival logs use.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::{Extensions, HeaderMap};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use super::lock;

/// One event at the client's edge.
#[derive(Debug, Clone)]
pub enum Heard {
    /// A request left for the network.
    Sent {
        at: Instant,
        method: String,
        path: String,
    },
    /// An answer to a request to `path` came back.
    Answered {
        at: Instant,
        path: String,
        status: u16,
        headers: HeaderMap,
    },
    /// A send failed with no answer (connection error).
    Failed { at: Instant, path: String },
}

impl Heard {
    /// When it happened.
    pub fn at(&self) -> Instant {
        match self {
            Heard::Sent { at, .. } | Heard::Answered { at, .. } | Heard::Failed { at, .. } => *at,
        }
    }
}

/// The log of a client's sends and answers, shared by its clones.
#[derive(Debug, Clone, Default)]
pub struct Tap(Arc<Mutex<Vec<Heard>>>);

impl Tap {
    /// Every event, in order.
    pub fn heard(&self) -> Vec<Heard> {
        lock(&self.0).clone()
    }

    /// Logs `event`, after every earlier one.
    fn push(&self, event: Heard) {
        lock(&self.0).push(event);
    }
}

/// The value of header `name` as text, if present and visible ASCII.
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[async_trait::async_trait]
impl Middleware for Tap {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let path = req.url().path().to_owned();
        self.push(Heard::Sent {
            at: Instant::now(),
            method: req.method().as_str().to_owned(),
            path: path.clone(),
        });
        let result = next.run(req, extensions).await;
        let at = Instant::now();
        self.push(match &result {
            Ok(resp) => Heard::Answered {
                at,
                path,
                status: resp.status().as_u16(),
                headers: resp.headers().clone(),
            },
            Err(_) => Heard::Failed { at, path },
        });
        result
    }
}
