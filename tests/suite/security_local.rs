//! A hostile local user and a hostile model on the gateway's own host (issue 23, items 2 and
//! 4), each reproduced on the real binaries. The tests need root (to act as a second user,
//! uid 65534); as any other user they say so and skip.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use loopgate_tests::{bin, reply, tool_result, Gateway, WAIT};
use serde_json::json;

/// The other local user (`nobody`).
const OTHER: u32 = 65534;

/// The warning a non-root gateway logs on a kernel without Yama's ptrace restriction.
const START_WINDOW: &str = "can attach to a worker as it starts";

fn root_or_skip(test: &str) -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        eprintln!("SKIPPED {test}: it needs root to act as uid {OTHER}");
    }
    root
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown_other(p: &Path) {
    nix::unistd::chown(
        p,
        Some(nix::unistd::Uid::from_raw(OTHER)),
        Some(nix::unistd::Gid::from_raw(OTHER)),
    )
    .unwrap();
}

/// Runs `loopgate serve` once (expecting a refusal); its exit code and stderr.
async fn serve_once(state: &Path, config: Option<&Path>) -> (Option<i32>, String) {
    let mut cmd = tokio::process::Command::new(bin("loopgate"));
    cmd.arg("serve").arg("--state-dir").arg(state);
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(WAIT, out)
        .await
        .expect("serve refused to start (it started instead)")
        .expect("serve runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A config whose `gateway_start` hook leaves `marker` (the attacker's payload).
fn planted_config(marker: &Path) -> String {
    format!(
        "[[hooks.gateway_start]]\ncommand = [\"sh\", \"-c\", \"id > {}\"]\n",
        marker.display()
    )
}

/// Issue 23 item 2, the attack as tried: uid 65534 created the state directory first, in a
/// world-writable parent, and planted a config with a `gateway_start` hook; root ran
/// `serve` there and the hook ran as root. Now `serve` refuses (EX_CONFIG) naming the path
/// and its owner, and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_dir_another_user_made_is_refused_r_j2() {
    if !root_or_skip("a_state_dir_another_user_made_is_refused_r_j2") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let marker = tmp.path().join("pwned");
    std::fs::write(state.join("loopgate.toml"), planted_config(&marker)).unwrap();
    chown_other(&state.join("loopgate.toml"));
    chown_other(&state);
    chmod(&state, 0o755);
    let (code, stderr) = serve_once(&state, None).await;
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains(&state.display().to_string()) && stderr.contains("uid 65534"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the planted hook ran");
}

/// Issue 23 item 2: a config file others can write is refused, in the state dir (group
/// writable) or named by `--config` elsewhere (owned by another user); a config made
/// writable while the gateway runs is refused by `loopgate reload`, which keeps the running
/// one. The normal case (a private state dir under `/tmp`) starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_others_can_write_is_refused_r_j2() {
    if !root_or_skip("a_config_file_others_can_write_is_refused_r_j2") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("pwned");
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let config = state.join("loopgate.toml");
    std::fs::write(&config, planted_config(&marker)).unwrap();
    chmod(&config, 0o660);
    let (code, stderr) = serve_once(&state, None).await;
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains(&config.display().to_string()) && stderr.contains("writable by its group"),
        "{stderr}"
    );

    // `config check` (perhaps run by another user than `serve`) warns.
    let out = tokio::process::Command::new(bin("loopgate"))
        .args(["config", "check"])
        .arg(&config)
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && said.contains("would refuse to start")
            && said.contains("its group"),
        "{said}"
    );

    let elsewhere = tmp.path().join("etc");
    std::fs::create_dir(&elsewhere).unwrap();
    let other_config = elsewhere.join("loopgate.toml");
    std::fs::write(&other_config, planted_config(&marker)).unwrap();
    chown_other(&other_config);
    chmod(&config, 0o600);
    let (code, stderr) = serve_once(&state, Some(&other_config)).await;
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains(&other_config.display().to_string()) && stderr.contains("uid 65534"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the planted hook ran");

    let gw = Gateway::start().await;
    let config = gw.state().join("loopgate.toml");
    chmod(&config, 0o666);
    let out = gw.cli(&["reload"]).await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(78), "{said}");
    assert!(said.contains("writable by group and others"), "{said}");
    gw.logs
        .assert_clean(&["config reload failed", "writable by group and others"]);
}

/// Issue 23 item 2: a state dir under a parent others can write without the sticky bit
/// (they could rename it away and put their own in its place) is refused, naming the parent;
/// the same parent with the sticky bit (as `/tmp`) is fine. So is a hook someone else owns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_dir_under_an_open_parent_or_with_foreign_hooks_is_refused_r_j2() {
    if !root_or_skip("a_state_dir_under_an_open_parent_or_with_foreign_hooks_is_refused_r_j2") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let open = tmp.path().join("open");
    let state: PathBuf = open.join("state");
    std::fs::create_dir_all(&state).unwrap();
    chmod(&open, 0o777);
    let (code, stderr) = serve_once(&state, None).await;
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains(&format!("{}, above", open.display()))
            && stderr.contains("without the sticky bit"),
        "{stderr}"
    );

    // Sticky: nobody else can replace the state dir. Now the hooks: one planted by uid 65534.
    chmod(&open, 0o1777);
    let hook = state.join("agents/main/hooks/boot");
    std::fs::create_dir_all(&hook).unwrap();
    std::fs::write(
        hook.join("HOOK.md"),
        "---\nevents: [\"agent:bootstrap\"]\n---\n",
    )
    .unwrap();
    std::fs::write(hook.join("handler"), "#!/bin/sh\nid\n").unwrap();
    chmod(&hook.join("handler"), 0o755);
    chown_other(&hook.join("handler"));
    let (code, stderr) = serve_once(&state, None).await;
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains(&hook.join("handler").display().to_string())
            && stderr.contains("uid 65534"),
        "{stderr}"
    );
}

/// Issue 23 item 4: `exec` read the provider key and the worker token from its ancestors'
/// `/proc/<pid>/environ` (worker and supervisor run as the same uid as the command). Now both
/// are non-dumpable (their `/proc` files belong to root) and the worker keeps the key and
/// the token out of its environment; the command's own process is still an ordinary one.
/// The gateway runs as uid 65534, as a non-root gateway would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_cannot_read_the_gateways_environment_r_e2() {
    if !root_or_skip("exec_cannot_read_the_gateways_environment_r_e2") {
        return;
    }
    let gw = Gateway::start_as(
        OTHER,
        "api_key_env = \"SECURITY_TEST_KEY\"\n[agents.defaults.tools.exec]\nsecurity = \"full\"\n",
        &[("SECURITY_TEST_KEY", "sk-leaked-secret")],
    )
    .await;
    // The worker's children (hooks, tools) no longer inherit the key or the token either:
    // an operator's internal hook (root's, allowed) records its environment.
    let hooks = gw.hooks_dir("main");
    for d in ["agents", "agents/main"] {
        chown_other(&gw.state().join(d));
    }
    super::tool_hooks::internal_hook(
        &hooks,
        "envdump",
        "\"agent:bootstrap\"",
        "cat >/dev/null; env > hook.env",
    );
    // Every ancestor of the command, up to init: its pid, then its environment or the error.
    let walk = "p=$$; while [ \"$p\" -gt 1 ]; do echo \"pid $p:\"; \
                tr '\\0' '\\n' < /proc/$p/environ; \
                p=$(awk '/^PPid:/{print $2}' /proc/$p/status); done 2>&1";
    gw.model.push(loopgate_tests::tool_call(
        "walk",
        "exec",
        &json!({"command": walk}).to_string(),
    ));
    gw.model.push(reply("done"));
    let out = gw.cli(&["agent", "-m", "go"]).await;
    assert!(out.status.success(), "{out:?}");
    let seen = tool_result(&gw, "walk");
    assert!(
        seen.contains(&format!("pid {}:", gw.pid())),
        "the walk did not reach the supervisor: {seen}"
    );
    // The command's own shell is dumpable (exec resets it): its environment is readable.
    assert!(seen.contains("PATH="), "{seen}");
    for leak in [
        "sk-leaked-secret",
        "LOOPGATE_WORKER_TOKEN",
        "SECURITY_TEST_KEY",
    ] {
        assert!(!seen.contains(leak), "{leak} leaked to exec: {seen}");
    }
    let hook_env = std::fs::read_to_string(gw.state().join("agents/main/workspace/hook.env"))
        .expect("the bootstrap hook ran");
    assert!(hook_env.contains("PATH="), "{hook_env}");
    for leak in ["sk-leaked-secret", "LOOPGATE_WORKER_TOKEN"] {
        assert!(
            !hook_env.contains(leak),
            "{leak} leaked to a hook: {hook_env}"
        );
    }
    // A non-root supervisor still reads its non-dumpable worker's memory figure
    // (`/proc/<pid>/statm` stays readable to all; `smaps` and `environ` do not).
    let out = gw.cli(&["status", "--json"]).await;
    let status: ipc::gateway::StatusResult = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("status --json: {e}: {out:?}"));
    assert!(
        status.supervisor.rss_bytes.is_some_and(|b| b > 0),
        "{status:?}"
    );
    let main = status.workers.iter().find(|w| w.agent_id == "main");
    assert!(
        main.is_some_and(|w| w.rss_bytes.is_some_and(|b| b > 0)),
        "{status:?}"
    );
    gw.logs.assert_clean(&[START_WINDOW]);
}

/// Issue 37 item 2: a worker got every provider's key and its link token in its
/// environment, and made itself non-dumpable only once running; `/proc/<pid>/environ` is
/// checked when it is opened, so another agent's `exec` that opened it in that window read
/// them afterwards (and the values stayed in the file after the worker's `remove_var`). Now
/// no secret is ever in a worker's environment: keys come over the link after the worker
/// is non-dumpable, and the supervisor knows its worker by the socket's peer pid. Agent
/// `main`'s worker is restarted 20 times while agent `ops`'s `exec` polls every worker's
/// `environ`; root (this test) reads each new worker's too; the model still gets the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_worker_environment_holds_a_key_or_token_across_restarts_issue_37() {
    if !root_or_skip("no_worker_environment_holds_a_key_or_token_across_restarts_issue_37") {
        return;
    }
    let gw = Gateway::start_as(
        OTHER,
        "api_key_env = \"SECURITY_TEST_KEY\"\n\
         [agents.list.ops.tools.exec]\nsecurity = \"full\"\ntimeout_seconds = 300\n",
        &[("SECURITY_TEST_KEY", "sk-leaked-secret")],
    )
    .await;
    const LEAKS: [&str; 3] = [
        "sk-leaked-secret",
        "SECURITY_TEST_KEY",
        "LOOPGATE_WORKER_TOKEN",
    ];
    let poll = "n=0; seen=0; : > started; while [ ! -e stop ]; do n=$((n+1)); \
                for d in /proc/[0-9]*; do c=; read -r c < $d/comm 2>/dev/null; case \"$c\" in \
                loopgate-work*) seen=$((seen+1)); tr '\\0' '\\n' < $d/environ 2>/dev/null \
                | grep -E 'sk-leaked|SECURITY_TEST_KEY|LOOPGATE_WORKER_TOKEN';; esac; done; \
                done; echo \"polled $n times, $seen worker looks\"";
    gw.model.push(loopgate_tests::tool_call(
        "poll",
        "exec",
        &json!({"command": poll}).to_string(),
    ));
    for _ in 0..30 {
        gw.model.push(reply("ok"));
    }
    // The path only: the worker (uid OTHER) makes the directory.
    let ops_ws = gw.state().join("agents/ops/workspace");
    let polling = gw.cli(&["agent", "--agent", "ops", "-m", "poll"]);
    let restarts = async {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !ops_ws.join("started").exists() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the poll never started"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let mut pids = std::collections::BTreeSet::new();
        for i in 0..20 {
            let out = gw.cli(&["worker", "restart", "main"]).await;
            assert!(out.status.success(), "restart {i}: {out:?}");
            let out = gw.cli(&["status", "--json"]).await;
            let status: ipc::gateway::StatusResult = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("status --json: {e}: {out:?}"));
            let pid = status
                .workers
                .iter()
                .find(|w| w.agent_id == "main")
                .and_then(|w| w.pid)
                .expect("main's worker runs");
            assert!(pids.insert(pid), "restart {i} kept pid {pid}");
            // Root reads any process's environment: nothing secret in it.
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let environ = String::from_utf8_lossy(&environ);
            assert!(environ.contains("PATH="), "{environ}");
            for leak in LEAKS {
                assert!(
                    !environ.contains(leak),
                    "{leak} in worker {pid}'s environment"
                );
            }
        }
        // The last worker still has the key where it needs it: in its model requests.
        let out = gw.cli(&["agent", "--agent", "main", "-m", "hi"]).await;
        assert!(out.status.success(), "{out:?}");
        std::fs::write(ops_ws.join("stop"), "").unwrap();
    };
    let (polled, ()) = tokio::join!(polling, restarts);
    assert!(polled.status.success(), "{polled:?}");
    let seen = tool_result(&gw, "poll");
    assert!(seen.contains("polled"), "{seen}");
    for leak in LEAKS {
        assert!(!seen.contains(leak), "{leak} leaked to exec: {seen}");
    }
    let auth = gw.model.requests();
    assert!(
        auth.iter()
            .all(|r| r.authorization.as_deref() == Some("Bearer sk-leaked-secret")),
        "a model request without the key"
    );
    // What stays open (an attach while a worker starts) is said, where the kernel leaves it.
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    if yama.trim().parse::<u32>().unwrap_or(0) == 0 {
        assert!(
            gw.logs.all().iter().any(|l| l.contains(START_WINDOW)),
            "no start-window warning without Yama"
        );
    }
    gw.logs.assert_clean(&[START_WINDOW]);
}
