//! The operator's reload and config check (issue 14, item 6): `loopgate reload` takes the
//! SIGHUP path and prints what changed, or the error while the old config keeps serving;
//! `loopgate config check` validates a file with `serve`'s messages and exit code.

use loopgate_tests::{bin, Gateway};
use serde_json::json;
use std::process::Stdio;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_prints_what_changed_and_keeps_the_old_config_on_errors_r_j4() {
    let mut gw = Gateway::start().await;
    let mut c = gw.connect().await;
    gw.rewrite_config("", "[agents.list.ops]\nname = \"Operations\"\n");
    let out = gw.cli(&["reload"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("agent ops added"), "{stdout}");
    let (_, fin) = c
        .turn(json!({"message": "hi ops", "idempotencyKey": "rl-1", "agentId": "ops"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(gw.worker_pid("ops").await.is_some(), "its worker runs");
    // Nothing changed: said so.
    let out = gw.cli(&["reload"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing changed"));
    // A broken file: the error, exit 78, and the old config goes on serving.
    std::fs::write(gw.state().join("loopgate.toml"), "[gateway]\nbogus = 1\n").unwrap();
    let out = gw.cli(&["reload"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("loopgate.toml") && stderr.contains("bogus"),
        "{stderr}"
    );
    let (_, fin) = c
        .turn(json!({"message": "still", "idempotencyKey": "rl-2", "agentId": "ops"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "the running config stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_validates_a_file_as_serve_would() {
    let dir = tempfile::tempdir().unwrap();
    let check = |file: &std::path::Path| {
        std::process::Command::new(bin("loopgate"))
            .arg("--state-dir")
            .arg(dir.path())
            .args(["config", "check"])
            .arg(file)
            .stdin(Stdio::null())
            .output()
            .expect("loopgate runs")
    };
    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        "[agents.list.ops]\n[messages.queue]\nmode = \"collect\"\n",
    )
    .unwrap();
    let out = check(&good);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("valid (2 agents: main, ops)"), "{stdout}");
    // A relative state directory is where the command runs (it was read twice over:
    // `state/state/...`).
    let parent = dir.path().parent().expect("a parent");
    let name = dir.path().file_name().expect("a name");
    let out = std::process::Command::new(bin("loopgate"))
        .current_dir(parent)
        .arg("--state-dir")
        .arg(name)
        .args(["config", "check"])
        .arg(&good)
        .stdin(Stdio::null())
        .output()
        .expect("loopgate runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[agents.defaults]\n\n[messages.queue]\nmode = \"later\"\n",
    )
    .unwrap();
    let out = check(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("bad.toml:4") && stderr.contains("messages.queue.mode"),
        "{stderr}"
    );
    // The same message `serve` prints for the same file.
    let serve = std::process::Command::new(bin("loopgate"))
        .arg("--state-dir")
        .arg(dir.path())
        .args(["serve", "--config"])
        .arg(&bad)
        .stdin(Stdio::null())
        .output()
        .expect("loopgate runs");
    assert_eq!(serve.status.code(), Some(78));
    assert!(
        String::from_utf8_lossy(&serve.stderr).contains(stderr.trim()),
        "{stderr}"
    );
    let missing = dir.path().join("missing.toml");
    assert_eq!(
        check(&missing).status.code(),
        Some(78),
        "a named file must exist"
    );
}
