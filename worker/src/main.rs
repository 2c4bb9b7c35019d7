//! `loopgate-worker`: started by `loopgate serve`, never by hand. Parses its arguments, reads
//! the environment once, logs JSON lines to stderr (the supervisor relays them) and runs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "loopgate-worker",
    version,
    about = "loopgate agent worker (started by `loopgate serve`)"
)]
struct Args {
    /// Agent id this worker runs.
    #[arg(long)]
    agent: String,
    /// The supervisor's private socket for this worker.
    #[arg(long)]
    connect: PathBuf,
}

fn main() -> ExitCode {
    // `exec` commands run under this binary in reaper mode (see `execpolicy::reaper`).
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if raw.get(1).is_some_and(|a| a == execpolicy::reaper::FLAG) {
        let code = execpolicy::reaper::main(&raw[2..]);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let args = Args::parse();
    let env: HashMap<String, String> = std::env::vars().collect();
    let filter = env
        .get("LOOPGATE_LOG")
        .or_else(|| env.get("RUST_LOG"))
        .cloned()
        .unwrap_or_else(|| "info".into());
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| "info".into()),
        )
        .init();
    let Some(token) = env.get("LOOPGATE_WORKER_TOKEN").cloned() else {
        eprintln!("loopgate-worker: LOOPGATE_WORKER_TOKEN is not set; this program is started by `loopgate serve`");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("loopgate-worker: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let opts = worker::Options {
        agent_id: args.agent,
        connect: args.connect,
        token,
        env,
    };
    match runtime.block_on(worker::run(opts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "Worker failed.");
            ExitCode::from(1)
        }
    }
}
