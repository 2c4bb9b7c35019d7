//! `loopgate`: the supervisor (`loopgate serve`) and the operator CLI. Parses arguments, reads
//! the environment once, sets up logging and hands over to the library.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use supervisor::config::Overrides;
use supervisor::{client, paths, serve};

#[derive(Parser)]
#[command(
    name = "loopgate",
    version,
    about = "A crash-isolated agent gateway speaking OpenClaw's Gateway protocol v4"
)]
struct Cli {
    /// State directory (default: $LOOPGATE_STATE_DIR, else ~/.loopgate).
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the gateway (supervisor) in the foreground.
    Serve {
        /// Config file (default: $LOOPGATE_CONFIG, else <state>/loopgate.toml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// WebSocket port (overrides gateway.port; 0 picks a free port).
        #[arg(long)]
        port: Option<u16>,
        /// Bind address (overrides gateway.bind): loopback, lan or an IP.
        #[arg(long)]
        bind: Option<String>,
        /// Log format on stderr.
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormat,
    },
    /// Send a message to an agent and stream the reply (exit 0 ok, 1 error, 2 timeout).
    Agent {
        #[arg(short, long)]
        message: String,
        /// Agent id (default: main).
        #[arg(long)]
        agent: Option<String>,
        /// Session key (bare keys are scoped to the agent: agent:<id>:<key>).
        #[arg(long)]
        session_key: Option<String>,
        /// Run timeout in seconds (0 = none; default: the agent's configured timeout).
        #[arg(long)]
        timeout: Option<u64>,
        /// Model for this run: "<provider>/<model>" or a model name on the agent's provider.
        #[arg(long)]
        model: Option<String>,
        /// Print the final result as JSON instead of streaming text.
        #[arg(long)]
        json: bool,
    },
    /// Wait for a run's outcome and print it as JSON (exit 0 ok, 1 error, 2 timeout or still queued).
    Wait {
        run_id: String,
        #[arg(long)]
        timeout_ms: Option<u64>,
    },
    /// Show the supervisor and its workers.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Ask the gateway for its health snapshot.
    Health,
    /// List sessions, most recently updated first.
    Sessions {
        /// Only this agent's.
        #[arg(long)]
        agent: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// Show a session's transcript (bare keys are scoped to main: agent:main:<key>).
    History {
        session_key: String,
        #[arg(long, default_value_t = 200)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// Show the gateway's recent log lines (its workers' included); --follow keeps printing.
    Logs {
        #[arg(long, default_value_t = 200)]
        limit: u32,
        #[arg(short, long)]
        follow: bool,
    },
    /// Stop admitting runs, let in-flight runs finish (abort the rest at the deadline), then
    /// stop the gateway. Waits until the gateway has exited.
    Drain {
        /// Deadline in seconds (default: gateway.drain_timeout_seconds).
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// Show the audit ledger: run lifecycle and tool start/result records with result codes
    /// and timings (never content), oldest first. Reads the agent databases directly.
    Audit {
        /// Only this agent (default: all agents).
        #[arg(long)]
        agent: Option<String>,
        /// Newest records to show.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Read the config file again (as SIGHUP) and print what changed; a broken file keeps
    /// the running config and prints the error (exit 78).
    Reload,
    /// Config files.
    Config {
        #[command(subcommand)]
        command: ConfigCmd,
    },
    /// Operator commands for agent workers.
    Worker {
        #[command(subcommand)]
        command: WorkerCmd,
    },
    /// The device tokens this gateway issued (to Control UI tabs, TUIs and other clients
    /// that proved a device identity): list, revoke or rotate them.
    Devices {
        #[command(subcommand)]
        command: DevicesCmd,
    },
    /// Commands waiting for an operator (`tools.exec.security = "ask"`): list them, allow
    /// one (once, or `--always`: its exact command joins the agent's allowlist), or deny it;
    /// list and revoke the commands allowed for good.
    Approvals {
        #[command(subcommand)]
        command: Option<ApprovalsCmd>,
    },
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// Validate a config file without starting anything (default: the one `serve` would
    /// read): the same messages and exit code (78) as `serve`.
    Check { file: Option<PathBuf> },
    /// Print the running gateway's config file (the gateway token and URL passwords
    /// redacted).
    Get {
        /// The whole `config.get` answer (parse, hashes, effective settings) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set one key and apply it at once (`config.patch`): `VALUE` is JSON5 (`900`, `true`,
    /// `"text"`, `["a/b"]`, `null` removes the key), else a plain string.
    Set { key: String, value: String },
    /// Merge a JSON5 patch into the config and apply it at once (`-`: read it from stdin).
    Patch { patch: String },
}

#[derive(Subcommand)]
enum ApprovalsCmd {
    /// Pending approvals (the default).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Let the command run (an id prefix is enough when it is unique).
    Allow {
        id: String,
        /// Also allow this exact command from now on (kept across restarts).
        #[arg(long)]
        always: bool,
    },
    /// Refuse the command: the model gets an error result.
    Deny { id: String },
    /// The commands allowed for good (`allow --always`), by agent.
    Patterns {
        #[arg(long)]
        json: bool,
    },
    /// Forget a command allowed for good; the agent's running worker restarts without it
    /// (its in-flight runs finish first).
    Revoke { agent: String, pattern: String },
}

#[derive(Subcommand)]
enum DevicesCmd {
    /// Every device with a token: client, role, state, scopes.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a device's token and close its connections; it must connect with the gateway
    /// token again to get a new one.
    Revoke {
        device_id: String,
        #[arg(long, default_value = "operator")]
        role: String,
    },
    /// Replace a device's token (the old one stops working; its connections are closed).
    Rotate {
        device_id: String,
        #[arg(long, default_value = "operator")]
        role: String,
    },
}

#[derive(Subcommand)]
enum WorkerCmd {
    /// Restart an agent's worker: drain it, then start a new one (or kill it now with
    /// --force, failing its in-flight runs). Also clears a tripped crash-loop breaker.
    Restart {
        agent: String,
        #[arg(long)]
        force: bool,
    },
}

/// Logs go to stderr: JSON lines with `--log-format json`; otherwise plain text, without
/// timestamps under journald (`$JOURNAL_STREAM` set), which stamps lines itself.
fn init_logging(format: LogFormat, filter: Option<String>, journald: bool) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter.unwrap_or_else(|| "info".into()))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        // Also into the in-memory ring `logs.tail` reads.
        .with_writer(|| supervisor::log_ring::TeeWriter)
        .with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text if journald => builder.with_ansi(false).without_time().init(),
        LogFormat::Text => builder.with_ansi(false).init(),
    }
}

fn main() -> ExitCode {
    // The gateway holds provider keys and tokens in its environment and memory; a
    // non-dumpable process's `/proc/<pid>/environ` and memory are closed to other processes
    // of the same uid, such as the commands a worker's `exec` runs (issue 23 item 4). Workers
    // and hooks it starts are dumpable again after their exec; workers turn it off for
    // themselves.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("loopgate: cannot make the process non-dumpable: {e}");
        return ExitCode::from(1);
    }
    let cli = Cli::parse();
    let env: HashMap<String, String> = std::env::vars().collect();
    let state_dir = match paths::state_dir(
        cli.state_dir.clone(),
        var(&env, "LOOPGATE_STATE_DIR").map(PathBuf::from),
        var(&env, "HOME").map(PathBuf::from),
    ) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("loopgate: {e}");
            return ExitCode::from(1);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("loopgate: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    dispatch(cli.command, state_dir, env, &runtime)
}

/// A variable of the environment `main` read once; empty counts as unset.
fn var(env: &HashMap<String, String>, k: &str) -> Option<String> {
    env.get(k).filter(|v| !v.is_empty()).cloned()
}

/// Runs one subcommand: `serve`, `config check` and `audit` here, every other one as a
/// client of the gateway's unix socket.
fn dispatch(
    command: Cmd,
    state_dir: PathBuf,
    env: HashMap<String, String>,
    runtime: &tokio::runtime::Runtime,
) -> ExitCode {
    let socket = paths::socket(&state_dir);
    match command {
        Cmd::Serve {
            config,
            port,
            bind,
            log_format,
        } => {
            let flags = ServeFlags {
                config,
                port,
                bind,
                log_format,
            };
            run_serve(flags, state_dir, env, runtime)
        }
        Cmd::Agent {
            message,
            agent,
            session_key,
            timeout,
            model,
            json,
        } => runtime.block_on(client::agent(
            &socket,
            client::AgentArgs {
                message,
                agent,
                session_key,
                timeout,
                model,
                json,
            },
        )),
        Cmd::Wait { run_id, timeout_ms } => {
            runtime.block_on(client::wait(&socket, run_id, timeout_ms))
        }
        Cmd::Status { json } => runtime.block_on(client::status(&socket, json)),
        Cmd::Health => runtime.block_on(client::health(&socket)),
        Cmd::Sessions { agent, limit, json } => {
            runtime.block_on(client::sessions(&socket, agent, limit, json))
        }
        Cmd::History {
            session_key,
            limit,
            json,
        } => runtime.block_on(client::history(&socket, session_key, limit, json)),
        Cmd::Logs { limit, follow } => runtime.block_on(client::logs(&socket, limit, follow)),
        Cmd::Drain { timeout } => runtime.block_on(client::drain(&socket, timeout)),
        Cmd::Audit { agent, limit, json } => client::audit(&state_dir, agent, limit, json),
        Cmd::Worker {
            command: WorkerCmd::Restart { agent, force },
        } => runtime.block_on(client::worker_restart(&socket, agent, force)),
        Cmd::Reload => runtime.block_on(client::reload(&socket)),
        Cmd::Config { command } => match command {
            ConfigCmd::Check { file } => check_config(file, &state_dir, &env),
            ConfigCmd::Get { json } => runtime.block_on(client::config_get(&socket, json)),
            ConfigCmd::Set { key, value } => {
                runtime.block_on(client::config_set(&socket, &key, &value))
            }
            ConfigCmd::Patch { patch } => runtime.block_on(client::config_patch(&socket, &patch)),
        },
        Cmd::Approvals { command } => runtime.block_on(approvals(&socket, command)),
        Cmd::Devices { command } => runtime.block_on(devices(&socket, command)),
    }
}

/// `loopgate serve`'s own flags.
struct ServeFlags {
    config: Option<PathBuf>,
    port: Option<u16>,
    bind: Option<String>,
    log_format: LogFormat,
}

/// `loopgate serve`: logging first, then the gateway until it stops.
fn run_serve(
    flags: ServeFlags,
    state_dir: PathBuf,
    env: HashMap<String, String>,
    runtime: &tokio::runtime::Runtime,
) -> ExitCode {
    init_logging(
        flags.log_format,
        var(&env, "LOOPGATE_LOG").or_else(|| var(&env, "RUST_LOG")),
        var(&env, "JOURNAL_STREAM").is_some(),
    );
    runtime.block_on(serve::run(serve_options(flags, state_dir, env)))
}

/// What `serve::run` needs, from the flags and the environment (`env` itself is handed on:
/// workers get their allowed part of it).
fn serve_options(
    flags: ServeFlags,
    state_dir: PathBuf,
    env: HashMap<String, String>,
) -> serve::ServeOptions {
    // Notify systemd only when it is talking to us (WATCHDOG_PID unset or ours).
    let pid_ok = var(&env, "WATCHDOG_PID").is_none_or(|p| p == std::process::id().to_string());
    let watchdog = var(&env, "WATCHDOG_USEC")
        .filter(|_| pid_ok)
        .and_then(|v| v.parse().ok());
    let notifier =
        supervisor::systemd::Notifier::new(var(&env, "NOTIFY_SOCKET").as_deref(), watchdog);
    let (config_path, config_explicit) = match flags
        .config
        .or_else(|| var(&env, "LOOPGATE_CONFIG").map(PathBuf::from))
    {
        Some(p) => (p, true),
        None => (paths::default_config(&state_dir), false),
    };
    let program = std::env::current_exe()
        .unwrap_or_else(|_| PathBuf::from(std::env::args_os().next().unwrap_or_default()));
    let worker_bin = var(&env, "LOOPGATE_WORKER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|p| p.parent().map(|d| d.join("loopgate-worker")))
                .unwrap_or_else(|| PathBuf::from("loopgate-worker"))
        });
    let overrides = Overrides {
        port: flags.port,
        bind: flags.bind,
        token: var(&env, "LOOPGATE_GATEWAY_TOKEN"),
        state_token: None,
    };
    serve::ServeOptions {
        state_dir,
        config_path,
        config_explicit,
        overrides,
        worker_bin,
        program,
        env,
        notifier,
    }
}

/// `loopgate config check [FILE]`: the file `serve` would read unless one is named.
fn check_config(
    file: Option<PathBuf>,
    state_dir: &Path,
    env: &HashMap<String, String>,
) -> ExitCode {
    let env_config = var(env, "LOOPGATE_CONFIG").map(PathBuf::from);
    let explicit = file.is_some() || env_config.is_some();
    let path = file
        .or(env_config)
        .unwrap_or_else(|| paths::default_config(state_dir));
    supervisor::config_check::check(
        &path,
        state_dir,
        explicit,
        var(env, "LOOPGATE_GATEWAY_TOKEN"),
    )
}

/// `loopgate approvals [...]` (`list` when no subcommand is given).
async fn approvals(socket: &Path, command: Option<ApprovalsCmd>) -> ExitCode {
    match command.unwrap_or(ApprovalsCmd::List { json: false }) {
        ApprovalsCmd::List { json } => client::approvals::list(socket, json).await,
        ApprovalsCmd::Allow { id, always } => {
            let decision = if always { "allow-always" } else { "allow-once" };
            client::approvals::resolve(socket, id, decision).await
        }
        ApprovalsCmd::Deny { id } => client::approvals::resolve(socket, id, "deny").await,
        ApprovalsCmd::Patterns { json } => client::approvals::patterns(socket, json).await,
        ApprovalsCmd::Revoke { agent, pattern } => {
            client::approvals::revoke(socket, agent, pattern).await
        }
    }
}

/// `loopgate devices list|revoke|rotate`.
async fn devices(socket: &Path, command: DevicesCmd) -> ExitCode {
    match command {
        DevicesCmd::List { json } => client::devices::list(socket, json).await,
        DevicesCmd::Revoke { device_id, role } => {
            client::devices::revoke(socket, device_id, role).await
        }
        DevicesCmd::Rotate { device_id, role } => {
            client::devices::rotate(socket, device_id, role).await
        }
    }
}
