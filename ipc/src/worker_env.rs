//! The environment a worker is started with, a contract between the two processes: the
//! supervisor passes exactly the [`PLAIN`] variables it has, each provider's `api_key_env`
//! variable, and [`TOKEN`]; the worker reads them once and keeps only [`PLAIN`] in its
//! process environment (issue 23 item 4: secrets stay in their process, so a hook or any
//! other child never inherits the keys or the token).

/// The link token the worker proves itself with in its `Hello`.
pub const TOKEN: &str = "LOOPGATE_WORKER_TOKEN";

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
