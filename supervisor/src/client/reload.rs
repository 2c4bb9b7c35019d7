//! `loopgate reload`: the running gateway reads its config again, as on SIGHUP, and says
//! what changed (a broken file: the error, exit 78 as `serve`'s).

use std::path::Path;
use std::process::ExitCode;

use ipc::gateway::{Method, NoParams, ReloadResult};

use super::{emit, fail, Client};

/// Exit code for a config error, as `serve`'s (`serve::EXIT_CONFIG`).
const EXIT_CONFIG: u8 = 78;

pub async fn reload(socket: &Path) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let r: ReloadResult = match client.ask(Method::GatewayReload, &NoParams {}).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if !r.ok {
        super::note(format!(
            "the config was not reloaded (the running config is kept): {}",
            r.error.unwrap_or_default()
        ));
        return ExitCode::from(EXIT_CONFIG);
    }
    let mut out = String::new();
    if r.changed.is_empty() {
        out.push_str("Config reloaded: nothing changed.\n");
    } else {
        out.push_str("Config reloaded:\n");
        for c in &r.changed {
            out.push_str(&format!("  {c}\n"));
        }
    }
    for w in &r.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    emit(&out);
    ExitCode::SUCCESS
}
