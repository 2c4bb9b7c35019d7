//! The WebSocket listener (`gateway.bind`:`gateway.port`): Gateway protocol v4, one JSON frame
//! per text message, on any path; plus `GET /healthz` and `GET /readyz` on the same port.
//! Cross-origin browser upgrades (an `Origin` whose scheme, host or port differs from the
//! `Host` it was sent to) are refused. The door's limits (connection cap, header and
//! pre-upgrade timeouts, the pre-auth read budget) are in `door`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    HeaderValue, CONNECTION, HOST, ORIGIN, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY,
    SEC_WEBSOCKET_VERSION, UPGRADE,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use ipc::gateway::{MAX_PAYLOAD_BYTES, MAX_PREAUTH_PAYLOAD_BYTES};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

use crate::auth::Peer;
use crate::connection::out::{render, Out, Outbound};
use crate::connection::peer::Transport;
use crate::connection::{serve_connection, FrameSource, Inbound};
use crate::gateway::Gateway;

type Body = Full<Bytes>;

/// How long a closing connection's close frame may take.
const KILL_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

fn close_message(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: reason.to_owned().into(),
    }))
}

/// Accepts WebSocket connections on `listener` until the gateway stops; `slots` bounds the
/// connections open at once (shared by every listener the gateway has had).
pub async fn serve(listener: TcpListener, gw: Arc<Gateway>, slots: Arc<Semaphore>) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = gw.stopping.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "Accepting a WebSocket connection failed.");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Over the cap the connection is closed at once: the descriptors beyond it stay free
        // for workers, databases and the operator's unix socket.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "Connection cap reached; closed a new connection.");
            drop(stream);
            continue;
        };
        let slot = Arc::new(slot);
        let _ = stream.set_nodelay(true);
        let gw = gw.clone();
        tokio::spawn(async move {
            let svc = {
                let slot = slot.clone();
                hyper::service::service_fn(move |req| handle(req, peer, gw.clone(), slot.clone()))
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(crate::door::HEADER_READ_TIMEOUT)
                .max_buf_size(crate::door::MAX_HEADER_BYTES)
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades();
            // Until the upgrade (or the one plain request) is done: a silent or slow client
            // is cut off, never held forever.
            match tokio::time::timeout(crate::door::PRE_UPGRADE_TIMEOUT, conn).await {
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, %peer, "HTTP connection ended with an error.")
                }
                Err(_) => tracing::debug!(%peer, "HTTP connection timed out before an upgrade."),
                Ok(Ok(())) => {}
            }
            drop(slot);
        });
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r
}

fn json(status: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn header(req: &Request<Incoming>, name: hyper::header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Host part of a `Host` header or an origin URL (no scheme, no port).
fn host_of(value: &str) -> &str {
    let rest = value.split_once("://").map_or(value, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or("");
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

fn is_local_host(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

async fn handle(
    req: Request<Incoming>,
    peer: SocketAddr,
    gw: Arc<Gateway>,
    slot: Arc<OwnedSemaphorePermit>,
) -> Result<Response<Body>, Infallible> {
    let is_upgrade = header(&req, UPGRADE).is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    if let Some(refused) = misdirected(&req, &gw.config(), peer) {
        return Ok(refused);
    }
    if !is_upgrade {
        return Ok(match (req.method(), req.uri().path()) {
            (&Method::GET, "/healthz") => {
                json(StatusCode::OK, r#"{"ok":true,"status":"live"}"#.into())
            }
            (&Method::GET, "/metrics") if gw.config().gateway.metrics => {
                metrics(&gw, req.headers()).await
            }
            (&Method::GET, "/readyz") => {
                if gw.draining.load(Ordering::Relaxed) || gw.stopping.is_cancelled() {
                    json(
                        StatusCode::SERVICE_UNAVAILABLE,
                        r#"{"ready":false,"reason":"draining"}"#.into(),
                    )
                } else {
                    json(StatusCode::OK, r#"{"ready":true}"#.into())
                }
            }
            _ => {
                let config = gw.config();
                let site = Site { gw: &gw };
                let ui = match &config.gateway.control_ui {
                    Some(ui) => {
                        let (method, uri) = (req.method(), req.uri());
                        crate::control_ui::serve(
                            ui,
                            &site,
                            method,
                            uri.path(),
                            uri.query(),
                            req.headers(),
                        )
                        .await
                    }
                    None => None,
                };
                ui.unwrap_or_else(|| text(StatusCode::NOT_FOUND, "not found: loopgate serves Gateway protocol v4 over WebSocket, /healthz and /readyz (and a Control UI when [gateway.control_ui] is set)\n"))
            }
        });
    }
    Ok(upgrade(req, peer, gw, slot))
}

/// On a loopback bind, every route (`/metrics`, the Control UI, probes and WebSocket
/// upgrades) answers only a loopback `Host` or one of `gateway.allowed_hosts`: a page whose
/// name was re-pointed at 127.0.0.1 (DNS rebinding) gets 421 Misdirected Request. A wider
/// bind is reached by names the operator cannot list here; it needs the token instead.
fn misdirected(
    req: &Request<Incoming>,
    config: &crate::config::Config,
    peer: SocketAddr,
) -> Option<Response<Body>> {
    if !config.gateway.bind.is_loopback() {
        return None;
    }
    let host = req
        .headers()
        .get(HOST)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    if crate::door::host_allowed(host, &config.gateway.allowed_hosts) {
        return None;
    }
    tracing::warn!(%peer, host = ?host.map(ipc::text::printable), path = req.uri().path(), "Refused a request for another host (421).");
    Some(text(
        StatusCode::MISDIRECTED_REQUEST,
        "misdirected request: this gateway answers only localhost, a loopback address or a host in gateway.allowed_hosts\n",
    ))
}

/// `GET /metrics`: open on a loopback bind; beyond it, only with the gateway token (or a
/// device token) as `Authorization: Bearer`.
async fn metrics(gw: &Arc<Gateway>, headers: &hyper::HeaderMap) -> Response<Body> {
    let config = gw.config();
    if !config.gateway.bind.is_loopback() {
        let bearer = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let site = Site { gw };
        if !crate::control_ui::Site::bearer_ok(&site, bearer).await {
            if bearer.is_some() {
                tokio::time::sleep(crate::door::FAILED_AUTH_DELAY).await;
            }
            let mut r = text(
                StatusCode::UNAUTHORIZED,
                "unauthorized: /metrics on a non-loopback bind needs Authorization: Bearer <gateway token>\n",
            );
            r.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
            return r;
        }
    }
    let now = crate::rpc::diagnostics::scrape(&gw.control, &gw.connections).await;
    let body = gw.metrics.encode(&now);
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
    );
    r
}

/// What the Control UI's routes need from the gateway.
struct Site<'a> {
    gw: &'a Gateway,
}

impl crate::control_ui::Site for Site<'_> {
    type MediaError = crate::rpc::MediaError;

    async fn bearer_ok(&self, token: Option<&str>) -> bool {
        let config = self.gw.config();
        let shared = match (config.gateway.auth_mode, config.gateway.token.as_deref()) {
            (crate::config::AuthMode::None, _) => return true,
            (_, Some(expected)) => token.is_some_and(|t| crate::auth::token_matches(t, expected)),
            (_, None) => false,
        };
        let Some(t) = token.filter(|t| !shared && !t.is_empty()) else {
            return shared;
        };
        let generation = crate::gatewaydb::devices::generation(&config);
        let token = t.to_owned();
        self.gw
            .db
            .devices(|reply| crate::gatewaydb::devices::DeviceCmd::AnyValid {
                token,
                generation,
                scope: ipc::gateway::Scope::Read,
                reply,
            })
            .await
            .unwrap_or(false)
    }

    fn media_key(&self) -> &[u8; 32] {
        &self.gw.media_key
    }

    async fn media(
        &self,
        agent_id: Option<&str>,
        session_key: &str,
        digits: &str,
    ) -> Result<Option<ipc::control::MediaBytes>, crate::rpc::MediaError> {
        crate::rpc::session_media(self.gw, agent_id, session_key, digits).await
    }

    fn boot_document(&self) -> ipc::gateway::ControlUiConfig {
        let config = self.gw.config();
        let base_path = config
            .gateway
            .control_ui
            .as_ref()
            .map(|u| u.base_path.clone())
            .unwrap_or_default();
        let identity = config
            .agents
            .first()
            .map(crate::catalog::identity)
            .unwrap_or_else(|| ipc::gateway::AgentIdentity {
                agent_id: "main".into(),
                name: "Assistant".into(),
                name_source: "default".into(),
                avatar: "A".into(),
            });
        ipc::gateway::ControlUiConfig {
            base_path,
            assistant_name: identity.name,
            assistant_avatar: identity.avatar,
            assistant_avatar_source: None,
            assistant_avatar_status: None,
            assistant_avatar_reason: None,
            assistant_agent_id: identity.agent_id,
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            embed_sandbox: "strict".into(),
            allow_external_embed_urls: false,
            automatically_fetch_favicons: false,
            community_invite: false,
            terminal_enabled: false,
            cli_agents_enabled: false,
            plugin_assets_require_auth: true,
            plugin_frame_grants: Vec::new(),
        }
    }
}

fn upgrade(
    mut req: Request<Incoming>,
    peer: SocketAddr,
    gw: Arc<Gateway>,
    slot: Arc<OwnedSemaphorePermit>,
) -> Response<Body> {
    let connection_ok =
        header(&req, CONNECTION).is_some_and(|c| c.to_ascii_lowercase().contains("upgrade"));
    let version_ok = header(&req, SEC_WEBSOCKET_VERSION) == Some("13");
    let Some(key) = header(&req, SEC_WEBSOCKET_KEY).map(str::to_owned) else {
        return text(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key\n");
    };
    if !connection_ok || !version_ok {
        return text(StatusCode::BAD_REQUEST, "bad WebSocket upgrade request\n");
    }
    let host_header = header(&req, HOST).unwrap_or("").to_owned();
    let host = host_of(&host_header).to_owned();
    let origin = header(&req, ORIGIN).map(str::to_owned);
    if let Some(o) = &origin {
        if !crate::door::same_origin(o, &host_header) {
            tracing::warn!(%peer, origin = o.as_str(), "Refused a cross-origin WebSocket upgrade.");
            return text(
                StatusCode::FORBIDDEN,
                "cross-origin WebSocket connections are refused\n",
            );
        }
    }
    let proxied = ["x-forwarded-for", "x-real-ip", "forwarded"]
        .iter()
        .any(|h| req.headers().contains_key(*h));
    let peer_info = Peer {
        local: peer.ip().is_loopback() && is_local_host(&host) && !proxied,
        has_origin: origin.is_some(),
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let tasks = gw.connection_tasks.clone();
    tasks.spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let config = WebSocketConfig::default()
                    .max_message_size(Some(MAX_PAYLOAD_BYTES))
                    .max_frame_size(Some(MAX_PAYLOAD_BYTES));
                // Until `connect` succeeds, the socket itself yields at most the pre-auth
                // budget: tungstenite never buffers a large frame from an unauthenticated peer.
                let (io, budget) = crate::door::Budgeted::new(
                    TokioIo::new(upgraded),
                    crate::door::PREAUTH_READ_BUDGET,
                );
                let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
                connection(ws, peer, peer_info, gw, budget).await;
                drop(slot);
            }
            Err(e) => tracing::debug!(error = %e, %peer, "WebSocket upgrade failed."),
        }
    });
    let mut r = text(StatusCode::SWITCHING_PROTOCOLS, "");
    let h = r.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    r
}

type Ws = WebSocketStream<crate::door::Budgeted<TokioIo<hyper::upgrade::Upgraded>>>;

struct WsSource {
    inner: futures_util::stream::SplitStream<Ws>,
    max: usize,
    budget: crate::door::Budget,
}

impl FrameSource for WsSource {
    async fn next(&mut self) -> Inbound {
        loop {
            let text = match self.inner.next().await {
                Some(Ok(Message::Text(t))) => t.as_str().to_owned(),
                Some(Ok(Message::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                Some(Ok(Message::Close(_))) | None => return Inbound::Closed,
                Some(Err(WsError::Capacity(_))) => return Inbound::TooLarge,
                Some(Err(_)) => return Inbound::Closed,
            };
            if text.len() > self.max {
                return Inbound::TooLarge;
            }
            return Inbound::Text(text);
        }
    }

    fn set_max_frame(&mut self, max: usize) {
        self.max = max;
        // Authenticated: frames are now limited by size only.
        self.budget.lift();
    }
}

async fn connection(
    ws: Ws,
    peer: SocketAddr,
    info: Peer,
    gw: Arc<Gateway>,
    budget: crate::door::Budget,
) {
    tracing::debug!(%peer, local = info.local, "WebSocket client connected.");
    let (mut sink, stream) = ws.split();
    let source = WsSource {
        inner: stream,
        max: MAX_PREAUTH_PAYLOAD_BYTES,
        budget,
    };
    let (out, mut rx, queued) = Out::new();
    let closed = out.closed.clone();
    let kill = out.kill.clone();
    let writer = tokio::spawn(async move {
        'outer: loop {
            let item = tokio::select! {
                biased;
                _ = kill.cancelled() => {
                    // Queued frames are discarded; the close frame gets a moment, then the
                    // connection is dropped whether or not the client reads.
                    let _ = tokio::time::timeout(KILL_GRACE, sink.send(close_message(1008, "slow consumer"))).await;
                    break;
                }
                item = rx.recv() => match item { Some(i) => i, None => break },
            };
            // Frames already queued go out in one write (an event and its chat mirror, a
            // burst of deltas).
            let mut next = Some(item);
            let mut closing = None;
            while let Some(item) = next.take() {
                if let Outbound::Close { code, reason } = &item {
                    closing = Some(close_message(*code, reason));
                    break;
                }
                if let Some(text) = render(&item, &queued) {
                    let fed = tokio::select! {
                        biased;
                        _ = kill.cancelled() => continue 'outer,
                        r = sink.feed(Message::text(text)) => r,
                    };
                    if fed.is_err() {
                        break 'outer;
                    }
                }
                next = rx.try_recv().ok();
            }
            let flushed = tokio::select! {
                biased;
                _ = kill.cancelled() => continue,
                r = sink.flush() => r,
            };
            if flushed.is_err() {
                break;
            }
            if let Some(close) = closing {
                let _ = tokio::time::timeout(KILL_GRACE, sink.send(close)).await;
                break;
            }
        }
        let _ = tokio::time::timeout(KILL_GRACE, sink.close()).await;
        closed.cancel();
    });
    serve_connection(gw, Transport::WebSocket(info), source, out).await;
    let _ = writer.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_parsing() {
        assert_eq!(host_of("127.0.0.1:18789"), "127.0.0.1");
        assert_eq!(host_of("http://localhost:3000"), "localhost");
        assert_eq!(host_of("[::1]:80"), "::1");
        assert_eq!(host_of("https://evil.example/x"), "evil.example");
        assert!(is_local_host("::1") && is_local_host("localhost") && !is_local_host("10.0.0.1"));
    }
}
