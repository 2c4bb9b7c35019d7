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
    // `web_fetch` converts HTML in a child of this binary (see `isolate`).
    if raw
        .get(1)
        .is_some_and(|a| a == worker::tools::web_fetch_isolate::FLAG)
    {
        let code = worker::tools::web_fetch_isolate::child_main(&raw[2..]);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // Before anything else: a non-dumpable process's `/proc/<pid>/environ` and memory are
    // closed to other processes of the same uid, such as the commands `exec` runs (issue 23
    // item 4). The provider keys arrive over the link only after this (issue 37 item 2): no
    // secret is ever in this process's environment, which is readable until this call.
    // Programs this process execs are dumpable again (exec resets it).
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("loopgate-worker: cannot make the process non-dumpable: {e}");
        return ExitCode::from(1);
    }
    let args = Args::parse();
    let env: HashMap<String, String> = std::env::vars().collect();
    scrub_environment(&env);
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
    // One thread for the agent's async work: a turn's steps hand over to each other without
    // waking a second runtime thread, and an idle worker keeps one stack and one arena
    // (issue 24). SQLite, file tools and `exec` run on their own threads and processes.
    let runtime = match tokio::runtime::Builder::new_current_thread()
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
        env,
    };
    match runtime.block_on(worker::run(opts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<worker::store::journal::JournalStopped>() => {
            tracing::warn!(reason = %e, "Worker stopped: the agent's journal did not take it.");
            ExitCode::from(ipc::control::EXIT_JOURNAL_STOPPED)
        }
        Err(e) => {
            tracing::error!(error = %e, "Worker failed.");
            ExitCode::from(1)
        }
    }
}

/// Takes every variable but the plain ones (`ipc::worker_env::PLAIN`) out of the process
/// environment (the supervisor passes no other; this keeps a worker started some other way
/// from handing more to its children, hooks and tools).
fn scrub_environment(env: &HashMap<String, String>) {
    for name in env.keys() {
        if !ipc::worker_env::PLAIN.contains(&name.as_str()) {
            // Sound: `main` calls this before it starts the runtime or anything else that
            // spawns a thread, so no other thread can be reading the environment (the
            // reason `remove_var` is `unsafe` in edition 2024).
            std::env::remove_var(name);
        }
    }
}
