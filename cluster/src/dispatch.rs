//! Runs on their way to their agent's owner: a work-queue stream with one subject and one
//! durable consumer per agent. Any gateway publishes an accepted run; the agent's owner
//! pulls it, runs it and acknowledges it once its outcome is recorded. A delivery not
//! acknowledged within the lease TTL (its owner is gone) is delivered again, to whoever
//! owns the agent then, which finds the run started by the lost owner and closes it
//! (`Engine::start`): a run is never executed twice.

use async_nats::jetstream::{self, consumer, AckKind};
use bytes::Bytes;
use futures_util::StreamExt;

use crate::engine::{retrying, ClusterError, Engine, REQUEST_TIMEOUT};
use crate::names::{check_name, digest, RUNS_STREAM};

/// A run delivered to this gateway as its agent's owner.
pub struct Delivery {
    pub payload: Bytes,
    message: jetstream::Message,
}

impl Delivery {
    /// Done with it: the run's outcome is recorded. Confirmed by the engine.
    pub async fn ack(&self) -> Result<(), ClusterError> {
        self.message
            .double_ack()
            .await
            .map_err(ClusterError::engine)
    }

    /// Still running: holds the delivery for another ack wait.
    pub async fn progress(&self) -> Result<(), ClusterError> {
        self.message
            .ack_with(AckKind::Progress)
            .await
            .map_err(ClusterError::engine)
    }

    /// How many times it was delivered (more than once: an owner before this one had it).
    pub fn delivered(&self) -> i64 {
        self.message.info().map_or(1, |i| i.delivered)
    }
}

/// An agent's queue of runs, as its owner pulls it.
pub struct RunQueue {
    messages: consumer::pull::Stream,
}

impl RunQueue {
    /// The next run; `None` when the engine closed the queue (pull again).
    pub async fn next(&mut self) -> Option<Result<Delivery, ClusterError>> {
        let m = self.messages.next().await?;
        Some(
            m.map(|message| Delivery {
                payload: message.payload.clone(),
                message,
            })
            .map_err(ClusterError::engine),
        )
    }
}

impl Engine {
    /// Puts an accepted run on its agent's queue. Publishing the same run again within two
    /// minutes stores it once.
    pub async fn enqueue(
        &self,
        agent: &str,
        run_id: &str,
        payload: Bytes,
    ) -> Result<(), ClusterError> {
        check_name(agent).map_err(ClusterError::Name)?;
        let subject = format!("lg.run.{agent}");
        let id = format!("run.{}", digest(run_id));
        self.publish_once(&subject, payload, &id).await
    }

    /// The largest payload the engine takes in one message.
    pub fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }

    /// `agent`'s run queue, for its owner: deliveries not acknowledged within the lease TTL
    /// go to the next owner.
    pub async fn run_queue(&self, agent: &str) -> Result<RunQueue, ClusterError> {
        check_name(agent).map_err(ClusterError::Name)?;
        let name = format!("runs-{agent}");
        let stream = retrying(REQUEST_TIMEOUT, || async {
            self.js
                .get_stream(RUNS_STREAM)
                .await
                .map_err(ClusterError::engine)
        })
        .await?;
        let consumer: consumer::PullConsumer = retrying(REQUEST_TIMEOUT, || async {
            stream
                .get_or_create_consumer(
                    &name,
                    consumer::pull::Config {
                        durable_name: Some(name.clone()),
                        filter_subject: format!("lg.run.{agent}"),
                        ack_policy: consumer::AckPolicy::Explicit,
                        ack_wait: self.lease_ttl,
                        max_deliver: -1,
                        max_ack_pending: 10_000,
                        ..Default::default()
                    },
                )
                .await
                .map_err(ClusterError::engine)
        })
        .await?;
        let messages = consumer.messages().await.map_err(ClusterError::engine)?;
        Ok(RunQueue { messages })
    }
}
