//! The environment a worker is started with, a contract between the two processes: the
//! supervisor passes exactly the [`PLAIN`] variables it has and nothing else. No secret is
//! ever in a worker's environment (issue 37 item 2: `/proc/<pid>/environ` is readable to its
//! uid until the worker has made itself non-dumpable): provider keys arrive over the link
//! (`AgentSpec::secrets`, `ControlToWorker::Keys`), and the supervisor knows its worker by
//! the link socket's peer credentials, not by a token.

/// Variables every worker inherits when the supervisor has them; none is a secret (proxy
/// variables stay because the HTTP client reads them from the process environment).
pub const PLAIN: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "LOOPGATE_LOG",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];
