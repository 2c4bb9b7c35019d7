//! The connection to the engine and the buckets and stream every gateway of a cluster
//! shares, made by whichever gateway starts first (the same config makes the same ones).

use std::time::Duration;

use async_nats::jetstream::{self, kv, object_store, stream};

pub(crate) use crate::error::{retrying, wrong_last_sequence};
pub use crate::error::{ClusterError, REQUEST_TIMEOUT};
use crate::names::{
    check_name, NODES_BUCKET, OUTCOMES_BUCKET, OUTCOME_BODIES, PLACEMENT_BUCKET, RUNS_BUCKET,
    RUNS_STREAM, RUNS_SUBJECTS, TX_STREAM, TX_SUBJECTS, WORKSPACE_HEADS_BUCKET, WORKSPACE_OBJECTS,
};
use crate::settings::Settings;

/// How long `health` waits for the engine.
const HEALTH_WITHIN: Duration = Duration::from_secs(2);

/// How often the client pings an idle server (two unanswered: reconnect elsewhere).
const CLIENT_PING: Duration = Duration::from_secs(2);

/// Idempotency keys are kept this long (the gateway db keeps them as long as their runs).
pub const RUNS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// One gateway's handle on the cluster's engine.
#[derive(Clone)]
pub struct Engine {
    pub(crate) node: String,
    pub(crate) lease_ttl: Duration,
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) runs: kv::Store,
    pub(crate) outcomes: kv::Store,
    pub(crate) placement: kv::Store,
    pub(crate) nodes: kv::Store,
    pub(crate) workspaces: kv::Store,
    pub(crate) objects: object_store::ObjectStore,
    /// Outcomes too large for one message, kept as long as their records.
    pub(crate) bodies: object_store::ObjectStore,
    /// Largest workspace that moves with its agent (bytes of files).
    pub(crate) workspace_cap: u64,
    /// When this gateway's last heartbeat was recorded (a write needs quorum).
    last_write: std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

impl Engine {
    /// Connects to any of the settings' servers and makes sure the cluster's buckets and
    /// stream exist (refusing a lease TTL other than the one the cluster was made with).
    pub async fn connect(
        settings: &Settings,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Engine, ClusterError> {
        check_name(&settings.node).map_err(ClusterError::Name)?;
        let urls = settings.nats.join(", ");
        let failed = |why: String| ClusterError::Connect {
            urls: urls.clone(),
            why,
        };
        let addrs = settings
            .nats
            .iter()
            .map(|u| u.parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| failed(e.to_string()))?;
        let mut options = async_nats::ConnectOptions::new()
            .name(format!("loopgate {}", settings.node))
            .connection_timeout(REQUEST_TIMEOUT)
            // A server that stopped answering (its host cut off) is left for another of
            // the list within seconds, not the default two minutes.
            .ping_interval(CLIENT_PING)
            .request_timeout(Some(REQUEST_TIMEOUT));
        if let Some(name) = &settings.auth.token_env {
            let token = env(name).filter(|t| !t.is_empty()).ok_or_else(|| {
                failed(format!("cluster.token_env names {name}, which is not set"))
            })?;
            options = options.token(token);
        }
        if let Some(path) = &settings.auth.credentials_file {
            options = options
                .credentials_file(path)
                .await
                .map_err(|e| failed(format!("credentials file {}: {e}", path.display())))?;
        }
        if let Some(ca) = &settings.auth.tls_ca_file {
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        }
        let client = options
            .connect(addrs)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let mut js = jetstream::new(client.clone());
        js.set_timeout(REQUEST_TIMEOUT);
        let replicas = settings.replicas;
        // A cluster that is still forming refuses placements for a moment.
        let within = 3 * REQUEST_TIMEOUT;
        let runs = retrying(within, || bucket(&js, RUNS_BUCKET, RUNS_MAX_AGE, replicas)).await?;
        let outcomes = retrying(within, || {
            bucket(&js, OUTCOMES_BUCKET, RUNS_MAX_AGE, replicas)
        })
        .await?;
        let placement = retrying(within, || {
            bucket(&js, PLACEMENT_BUCKET, settings.lease_ttl, replicas)
        })
        .await?;
        let nodes = retrying(within, || {
            bucket(&js, NODES_BUCKET, settings.lease_ttl, replicas)
        })
        .await?;
        let workspaces = retrying(within, || {
            bucket(&js, WORKSPACE_HEADS_BUCKET, Duration::ZERO, replicas)
        })
        .await?;
        let bodies = retrying(within, || {
            objects(&js, OUTCOME_BODIES, RUNS_MAX_AGE, replicas)
        })
        .await?;
        let objects = retrying(within, || {
            objects(&js, WORKSPACE_OBJECTS, Duration::ZERO, replicas)
        })
        .await?;
        // The journals keep every record; a run queue forgets a run once acknowledged.
        let limits = stream::RetentionPolicy::Limits;
        retrying(within, || {
            stream(&js, TX_STREAM, TX_SUBJECTS, limits, replicas)
        })
        .await?;
        let work = stream::RetentionPolicy::WorkQueue;
        retrying(within, || {
            stream(&js, RUNS_STREAM, RUNS_SUBJECTS, work, replicas)
        })
        .await?;
        Ok(Engine {
            node: settings.node.clone(),
            lease_ttl: settings.lease_ttl,
            client,
            js,
            runs,
            outcomes,
            placement,
            nodes,
            workspaces,
            objects,
            bodies,
            workspace_cap: settings.workspace_max_bytes,
            last_write: Default::default(),
        })
    }

    /// Publishes `payload` on `subject` once: repeated (while the engine is busy, or after a
    /// lost answer) within the stream's duplicate window, it is stored once under `id`.
    pub(crate) async fn publish_once(
        &self,
        subject: &str,
        payload: bytes::Bytes,
        id: &str,
    ) -> Result<(), ClusterError> {
        retrying(REQUEST_TIMEOUT, || async {
            let publish = jetstream::message::PublishMessage::build()
                .payload(payload.clone())
                .message_id(id);
            self.js
                .send_publish(subject.to_owned(), publish)
                .await
                .map_err(ClusterError::engine)?
                .await
                .map_err(ClusterError::engine)
        })
        .await?;
        Ok(())
    }

    /// The largest workspace (bytes of files) that moves with its agent.
    pub fn workspace_cap(&self) -> u64 {
        self.workspace_cap
    }

    /// This gateway's node name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Whether the connection to the engine is up (not whether it has quorum: a write says).
    pub fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Says this gateway is alive (a member for one lease TTL from now).
    pub async fn heartbeat(&self) -> Result<(), ClusterError> {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let value = serde_json::to_vec(&crate::records::NodeRecord {
            node: self.node.clone(),
            at,
        })
        .map_err(ClusterError::engine)?;
        self.nodes
            .put(&self.node, value.into())
            .await
            .map_err(ClusterError::engine)?;
        *self.last_write.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(std::time::Instant::now());
        Ok(())
    }

    /// The engine's streams that are not whole yet, each with why (no leader, a replica
    /// offline or behind its leader): empty once the engine has healed from a fault. A
    /// second fault before that may find no quorum (a server back from a partition is
    /// still catching up while another goes).
    pub async fn lagging_streams(&self) -> Result<Vec<String>, ClusterError> {
        use futures_util::TryStreamExt;
        let names: Vec<String> = self
            .js
            .stream_names()
            .try_collect()
            .await
            .map_err(ClusterError::engine)?;
        let mut lagging = Vec::new();
        for name in names {
            let stream = self
                .js
                .get_stream(&name)
                .await
                .map_err(ClusterError::engine)?;
            let Some(cluster) = &stream.cached_info().cluster else {
                continue;
            };
            if cluster.leader.is_none() {
                lagging.push(format!("{name}: no leader"));
            }
            for peer in cluster.replicas.iter().filter(|p| p.offline || !p.current) {
                lagging.push(format!("{name}: {} behind", peer.name));
            }
        }
        Ok(lagging)
    }

    /// The gateways that said they were alive within the last lease TTL, sorted.
    pub async fn members(&self) -> Result<Vec<String>, ClusterError> {
        use futures_util::TryStreamExt;
        let mut keys: Vec<String> = self
            .nodes
            .keys()
            .await
            .map_err(ClusterError::engine)?
            .try_collect()
            .await
            .map_err(ClusterError::engine)?;
        keys.sort();
        Ok(keys)
    }

    /// `ok` when the engine can serve the cluster now, else why not: this gateway's
    /// heartbeat was recorded within the lease TTL, and the placement bucket's stream leader
    /// answers a read (a server alone answers account questions without quorum).
    pub async fn health(&self) -> String {
        if !self.connected() {
            return "disconnected from every NATS server".into();
        }
        // A lone server may still answer reads for a moment after quorum is gone; writes
        // tell: the heartbeats, written three times per lease TTL.
        let last = *self.last_write.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = last.filter(|at| at.elapsed() > self.lease_ttl) {
            return format!(
                "not answering: no write recorded for {} s (no quorum?)",
                at.elapsed().as_secs()
            );
        }
        let probe = crate::kv::read_current(&self.placement, "health-probe");
        match tokio::time::timeout(HEALTH_WITHIN, probe).await {
            Ok(Ok(_)) => "ok".into(),
            Ok(Err(e)) => format!("not answering: {e}"),
            Err(_) => format!(
                "not answering: no stream leader replied within {} s (no quorum?)",
                HEALTH_WITHIN.as_secs()
            ),
        }
    }
}

/// The stream `name` over `subjects`, made if missing: replicated, on disk, refusing a new
/// record rather than dropping one (the journals, the run queues), deduplicating
/// repeated publishes for two minutes.
async fn stream(
    js: &jetstream::Context,
    name: &str,
    subjects: &str,
    retention: stream::RetentionPolicy,
    replicas: usize,
) -> Result<(), ClusterError> {
    js.get_or_create_stream(stream::Config {
        name: name.into(),
        subjects: vec![subjects.into()],
        num_replicas: replicas,
        storage: stream::StorageType::File,
        retention,
        discard: stream::DiscardPolicy::New,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    })
    .await
    .map_err(ClusterError::engine)?;
    Ok(())
}

/// The object store `name`, made if missing (replicated, on disk, compressed; objects live
/// `max_age`, zero for ever).
async fn objects(
    js: &jetstream::Context,
    name: &str,
    max_age: Duration,
    replicas: usize,
) -> Result<object_store::ObjectStore, ClusterError> {
    let made = js
        .create_object_store(object_store::Config {
            bucket: name.into(),
            max_age,
            num_replicas: replicas,
            storage: stream::StorageType::File,
            compression: true,
            ..Default::default()
        })
        .await;
    match made {
        Ok(store) => Ok(store),
        Err(made) => js
            .get_object_store(name)
            .await
            .map_err(|e| ClusterError::Engine(format!("object store {name}: {made}; then {e}"))),
    }
}

/// Waits until `store` answers reads: a bucket just made has no responders for a moment.
async fn ready(name: &str, store: &kv::Store) -> Result<(), ClusterError> {
    let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
    loop {
        match store.get("ready-probe").await {
            Ok(_) => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(ClusterError::Engine(format!(
                    "bucket {name} does not answer: {e}"
                )))
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}

/// The bucket `name` with one value per key, made if missing; an existing bucket whose
/// entries live another length of time is the cluster's and this gateway's config disagrees.
async fn bucket(
    js: &jetstream::Context,
    name: &str,
    max_age: Duration,
    replicas: usize,
) -> Result<kv::Store, ClusterError> {
    let made = js
        .create_key_value(kv::Config {
            bucket: name.into(),
            history: 1,
            max_age,
            num_replicas: replicas,
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await;
    let store = match made {
        Ok(store) => store,
        Err(made) => js
            .get_key_value(name)
            .await
            .map_err(|e| ClusterError::Engine(format!("bucket {name}: {made}; then {e}")))?,
    };
    ready(name, &store).await?;
    let age = store
        .status()
        .await
        .map_err(ClusterError::engine)?
        .max_age();
    if age != max_age {
        return Err(ClusterError::Mismatch(format!(
            "the cluster's bucket {name} keeps entries {} s, this gateway's config says {} s (cluster.lease_ttl_seconds must be the same on every gateway)",
            age.as_secs(),
            max_age.as_secs()
        )));
    }
    Ok(store)
}
