//! The WebSocket listener while the gateway serves: its accept loop, the address the config
//! asked for, and its move to another address when a reload or a config write names one
//! (`gateway.port`, `gateway.bind`). A move happens inside the reload, before the new config
//! is in force: an address that cannot be bound refuses the reload (the running config and
//! listener stay), the old listener stops accepting before the new config applies, and the
//! new one accepts only after it does, so no connection is ever judged by the rules of an
//! address it did not come through. Connections already open stay.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::gateway::Gateway;
use crate::listen_ws;

pub(super) struct WsListener {
    /// The accept loop (`None` while a move has stopped it).
    task: Option<JoinHandle<()>>,
    /// What the config asked for (port 0: any free one) and what was bound.
    bound_for: SocketAddr,
    local: SocketAddr,
    /// Connections open at once, across moves (`gateway.max_connections`).
    slots: Arc<Semaphore>,
    /// `gateway.addr`: the bound address, for clients and tests.
    addr_file: PathBuf,
}

/// A move a reload asks for, prepared: the new address bound, not accepting yet.
pub(super) struct Move {
    listener: TcpListener,
    wanted: SocketAddr,
}

fn cannot(addr: SocketAddr, e: &std::io::Error) -> String {
    format!("cannot listen on ws://{addr}: {e}; the gateway keeps its address")
}

impl WsListener {
    /// Serves `listener`, bound for `bound_for`, and writes the address file.
    pub(super) fn start(
        gw: &Arc<Gateway>,
        listener: TcpListener,
        bound_for: SocketAddr,
        addr_file: PathBuf,
    ) -> WsListener {
        let cap = crate::door::connection_cap(gw.config().gateway.max_connections);
        let local = listener.local_addr().unwrap_or(bound_for);
        let mut this = WsListener {
            task: None,
            bound_for,
            local,
            slots: Arc::new(Semaphore::new(cap)),
            addr_file,
        };
        this.serve(gw, listener, bound_for);
        this
    }

    fn serve(&mut self, gw: &Arc<Gateway>, listener: TcpListener, bound_for: SocketAddr) {
        self.local = listener.local_addr().unwrap_or(bound_for);
        self.bound_for = bound_for;
        self.task = Some(tokio::spawn(listen_ws::serve(
            listener,
            gw.clone(),
            self.slots.clone(),
        )));
        if let Err(e) = std::fs::write(&self.addr_file, format!("{}\n", self.local)) {
            tracing::warn!(file = %self.addr_file.display(), error = %e, "Cannot write the gateway address file.");
        }
    }

    /// Stops accepting (connections already open stay).
    async fn stop_accepting(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    /// Binds `wanted` if it is not the address the listener was bound for (or the listener
    /// was lost: then it is bound again); `Err` says why it cannot be (the listener is then
    /// as it was). A new interface on the same port is
    /// bound after the old listener stops (both cannot hold the port); if that fails, the
    /// old address is bound again.
    pub(super) async fn prepare(
        &mut self,
        gw: &Arc<Gateway>,
        wanted: SocketAddr,
    ) -> Result<Option<Move>, String> {
        if wanted == self.bound_for && self.task.is_some() {
            return Ok(None);
        }
        match TcpListener::bind(wanted).await {
            Ok(listener) => Ok(Some(Move { listener, wanted })),
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && wanted.port() == self.local.port() =>
            {
                self.stop_accepting().await;
                match TcpListener::bind(wanted).await {
                    Ok(listener) => Ok(Some(Move { listener, wanted })),
                    Err(e) => {
                        let (old, bound_for) = (self.local, self.bound_for);
                        match TcpListener::bind(old).await {
                            Ok(l) => self.serve(gw, l, bound_for),
                            Err(again) => {
                                tracing::error!(addr = %old, error = %again, "Cannot listen on the gateway's address again; WebSocket clients cannot connect until the gateway restarts.")
                            }
                        }
                        Err(cannot(wanted, &e))
                    }
                }
            }
            Err(e) => Err(cannot(wanted, &e)),
        }
    }

    /// The prepared move, once the new config is in force: the old listener stops (if it
    /// has not already), the new one accepts.
    pub(super) async fn finish(&mut self, gw: &Arc<Gateway>, m: Move) {
        self.stop_accepting().await;
        self.serve(gw, m.listener, m.wanted);
        tracing::info!(ws = %format!("ws://{}", self.local), "The WebSocket listener moved to the configured address.");
    }

    /// Before the new config applies: stops the old listener if a move is prepared.
    pub(super) async fn before_apply(&mut self, m: Option<&Move>) {
        if m.is_some() {
            self.stop_accepting().await;
        }
    }

    /// Waits for the accept loop to end (the gateway is stopping).
    pub(super) async fn stopped(&mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}
