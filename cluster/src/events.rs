//! Run events across gateways: each gateway publishes the events of the runs it owns on its
//! own subject, and every gateway follows all the others'. Core NATS: in order from one
//! gateway, at most once (a gateway that is disconnected misses what was sent meanwhile;
//! outcomes, which are durable, are not carried here).

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
