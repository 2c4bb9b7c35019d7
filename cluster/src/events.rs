//! Between gateways on core NATS (nothing here is stored):
//! - run events: each gateway publishes the events of the runs it owns on its own subject,
//!   and every gateway follows all the others'; in order from one gateway, at most once (a
//!   gateway that is disconnected misses what was sent meanwhile; outcomes, which are
//!   durable, are not carried here);
//! - requests to one gateway (a session operation for an agent it owns), answered by it.

use bytes::Bytes;
use futures_util::StreamExt;

use crate::engine::{ClusterError, Engine};

/// The events of the other gateways, as this gateway receives them.
pub struct EventFeed {
    own: String,
    sub: async_nats::Subscriber,
}

impl EventFeed {
    /// The next event of another gateway; `None` when the subscription ended.
    pub async fn next(&mut self) -> Option<Bytes> {
        while let Some(m) = self.sub.next().await {
            if m.subject.as_str() != self.own {
                return Some(m.payload);
            }
        }
        None
    }
}

impl Engine {
    fn event_subject(&self) -> String {
        format!("lg.ev.{}", self.node)
    }

    /// Sends one of this gateway's run events to the others.
    pub async fn publish_event(&self, payload: Bytes) -> Result<(), ClusterError> {
        self.client
            .publish(self.event_subject(), payload)
            .await
            .map_err(ClusterError::engine)
    }

    /// Follows the other gateways' run events.
    pub async fn events(&self) -> Result<EventFeed, ClusterError> {
        let sub = self
            .client
            .subscribe("lg.ev.*")
            .await
            .map_err(ClusterError::engine)?;
        Ok(EventFeed {
            own: self.event_subject(),
            sub,
        })
    }
}

/// Requests other gateways sent to this one, each with where to answer.
pub struct Requests {
    sub: async_nats::Subscriber,
}

/// One request to this gateway.
pub struct Request {
    pub payload: Bytes,
    reply: Option<async_nats::Subject>,
}

impl Requests {
    /// The next request; `None` when the subscription ended.
    pub async fn next(&mut self) -> Option<Request> {
        self.sub.next().await.map(|m| Request {
            payload: m.payload,
            reply: m.reply,
        })
    }
}

impl Engine {
    fn request_subject(node: &str) -> String {
        format!("lg.req.{node}")
    }

    /// Follows the requests sent to this gateway.
    pub async fn requests(&self) -> Result<Requests, ClusterError> {
        let sub = self
            .client
            .subscribe(Self::request_subject(&self.node))
            .await
            .map_err(ClusterError::engine)?;
        Ok(Requests { sub })
    }

    /// Answers `request` (nothing if its sender no longer waits). A payload past the
    /// servers' `max_payload` is refused here, before anything is sent, so the caller can
    /// answer with something that fits.
    pub async fn answer(&self, request: &Request, payload: Bytes) -> Result<(), ClusterError> {
        let Some(reply) = request.reply.clone() else {
            return Ok(());
        };
        let max = self.max_payload();
        if payload.len() > max {
            return Err(ClusterError::Engine(format!(
                "an answer of {} bytes is past the servers' max_payload ({max} bytes)",
                payload.len()
            )));
        }
        self.client
            .publish(reply, payload)
            .await
            .map_err(ClusterError::engine)
    }

    /// Sends `payload` to gateway `node` and waits up to `timeout` for its answer.
    pub async fn ask(
        &self,
        node: &str,
        payload: Bytes,
        timeout: std::time::Duration,
    ) -> Result<Bytes, ClusterError> {
        let request = async_nats::Request::new()
            .payload(payload)
            .timeout(Some(timeout));
        self.client
            .send_request(Self::request_subject(node), request)
            .await
            .map(|m| m.payload)
            .map_err(|e| ClusterError::Engine(format!("gateway {node} did not answer: {e}")))
    }
}
