//! Attacks on the sandbox and the front door, each reproduced on the real binaries (issue
//! 10). A hostile model writes files and asks for commands; a hostile client or local user
//! connects. Each test fails on a gateway without the defence it names.

use std::os::unix::fs::PermissionsExt;

use loopgate_tests::{reply, tool_result, Gateway, WAIT};
use scripted_model::Step;
use serde_json::{json, Value};

fn call(id: &str, name: &str, arguments: Value) -> Step {
    loopgate_tests::tool_call(id, name, &arguments.to_string())
}

async fn run_turn(gw: &Gateway, key: &str) -> Value {
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "go", "idempotencyKey": key}))
        .await;
    fin
}

/// Attack 1: with `exec` denied, the model rewrote an internal hook's handler in its
/// workspace (`write` kept the executable bit) and the next run executed it. Now internal
/// hooks live outside every workspace (`<state>/agents/<id>/hooks`) and files the tools write
/// are never executable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_written_files_never_run_r_e2() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    // A hook planted in the workspace (where loopgate used to look for them).
    let planted = ws.join("hooks/boot");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(
        planted.join("HOOK.md"),
        "---\nevents: [\"agent:bootstrap\"]\n---\n",
    )
    .unwrap();
    let marker = gw.state().join("pwned");
    std::fs::write(planted.join("handler"), "#!/bin/sh\ntrue\n").unwrap();
    std::fs::set_permissions(
        planted.join("handler"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let script = format!("#!/bin/sh\nid > {}\n", marker.display());
    gw.model.push(call(
        "w1",
        "write",
        json!({"path": "hooks/boot/handler", "content": script}),
    ));
    gw.model.push(call(
        "w2",
        "write",
        json!({"path": "new.sh", "content": script}),
    ));
    gw.model.push(call(
        "e1",
        "edit",
        json!({"path": "hooks/boot/HOOK.md", "edits": [{"oldText": "---\n", "newText": "---\nname: x\n"}]}),
    ));
    gw.model.push(reply("done"));
    assert_eq!(run_turn(&gw, "plant").await["payload"]["status"], "ok");
    gw.model.push(reply("second run"));
    assert_eq!(run_turn(&gw, "trigger").await["payload"]["status"], "ok");
    assert!(!marker.exists(), "a model-written handler was executed");
    for f in ["hooks/boot/handler", "new.sh", "hooks/boot/HOOK.md"] {
        let mode = std::fs::metadata(ws.join(f)).unwrap().permissions().mode();
        assert_eq!(mode & 0o7111, 0, "{f} is executable: {mode:o}");
    }
    gw.logs.assert_clean(&[]);
}

/// Attack 2: `write` through a dangling symlink created a file outside the workspace. Every
/// symlink on the way (dangling, intermediate or last) must point inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_never_lead_out_of_the_workspace_r_e2() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    let outside = gw.state().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(outside.join("x"), ws.join("dangle")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("dir")).unwrap();
    std::fs::write(outside.join("secret"), "top secret").unwrap();
    gw.model.push(call(
        "d1",
        "write",
        json!({"path": "dangle", "content": "escaped"}),
    ));
    gw.model.push(call(
        "d2",
        "write",
        json!({"path": "dir/y", "content": "escaped"}),
    ));
    gw.model
        .push(call("d3", "read", json!({"path": "dir/secret"})));
    gw.model.push(call(
        "d4",
        "edit",
        json!({"path": "dir/secret", "edits": [{"oldText": "top", "newText": "no"}]}),
    ));
    gw.model.push(reply("done"));
    assert_eq!(run_turn(&gw, "escape").await["payload"]["status"], "ok");
    for id in ["d1", "d2", "d3", "d4"] {
        let r = tool_result(&gw, id);
        assert!(r.contains("outside the workspace"), "{id}: {r}");
    }
    assert!(!outside.join("x").exists() && !outside.join("y").exists());
    assert_eq!(
        std::fs::read_to_string(outside.join("secret")).unwrap(),
        "top secret"
    );
    gw.logs.assert_clean(&[]);
}

/// Attack 3: `*` in an allowlist pattern matched shell metacharacters under `sh -c`
/// (`echo hi; id > f` ran with `["echo *"]`). Allowlisted commands now run as an argv with
/// no shell, shell syntax is refused, and a program the model can configure through files
/// (`git`) is named in a warning at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowlist_never_reaches_a_shell_r_e2() {
    let gw = Gateway::start_with(
        "[agents.defaults.tools.exec]\nsecurity = \"allowlist\"\nallowlist = [\"echo *\", \"ls *\", \"git status\"]\n",
    )
    .await;
    gw.logs
        .wait_for("\"git\" is not on the exec safe list")
        .await;
    let ws = gw.workspace("main");
    for (id, cmd) in [
        ("s1", "echo hi; touch f1"),
        ("s2", "echo $(touch f2)"),
        ("s3", "echo `touch f3`"),
        ("s4", "ls && touch f4"),
        ("s5", "echo hi > f5"),
        ("s6", "ls\ntouch f6"),
    ] {
        gw.model.push(call(id, "exec", json!({ "command": cmd })));
    }
    gw.model.push(call(
        "ok",
        "exec",
        json!({"command": "echo 'a; b' \"c  d\""}),
    ));
    gw.model.push(reply("done"));
    assert_eq!(run_turn(&gw, "inject").await["payload"]["status"], "ok");
    for id in ["s1", "s2", "s3", "s4", "s5", "s6"] {
        let r = tool_result(&gw, id);
        assert!(r.contains("exec refused"), "{id}: {r}");
    }
    for f in ["f1", "f2", "f3", "f4", "f5", "f6"] {
        assert!(!ws.join(f).exists(), "{f} was created through a shell");
    }
    // Quoted text is passed literally, as words.
    assert!(
        tool_result(&gw, "ok").starts_with("a; b c  d"),
        "{}",
        tool_result(&gw, "ok")
    );
    gw.logs.assert_clean(&["is not on the exec safe list"]);
}

/// Issue 23 item 5 (R-E2): a quoted `*` in an allowlist pattern was a wildcard: `echo '*'`
/// allowed `echo hello world`, `cat 'a*b'` allowed `cat aXXb`. Pattern words are typed by
/// the operator's quoting: quoted, `*` is the character; unquoted, a wildcard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quoted_star_in_an_allowlist_is_the_character_r_e2() {
    let gw = Gateway::start_with(
        "[agents.defaults.tools.exec]\nsecurity = \"allowlist\"\nallowlist = [\"echo '*'\", \"cat 'a*b'\", \"ls *.txt\"]\n",
    )
    .await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("aXXb"), "not allowed").unwrap();
    std::fs::write(ws.join("a*b"), "allowed").unwrap();
    std::fs::write(ws.join("x.txt"), "").unwrap();
    for (id, cmd) in [
        ("q1", "echo hello world"),
        ("q2", "echo hello"),
        ("q3", "cat aXXb"),
        ("q4", "echo '*'"),
        ("q5", "cat 'a*b'"),
        ("q6", "ls x.txt"),
    ] {
        gw.model.push(call(id, "exec", json!({ "command": cmd })));
    }
    gw.model.push(reply("done"));
    assert_eq!(run_turn(&gw, "stars").await["payload"]["status"], "ok");
    for id in ["q1", "q2", "q3"] {
        let r = tool_result(&gw, id);
        assert!(r.contains("matches no pattern"), "{id}: {r}");
    }
    // The literal command itself runs, and an unquoted `*` is still a wildcard.
    assert!(
        tool_result(&gw, "q4").starts_with('*'),
        "{}",
        tool_result(&gw, "q4")
    );
    assert!(
        tool_result(&gw, "q5").starts_with("allowed"),
        "{}",
        tool_result(&gw, "q5")
    );
    assert!(
        tool_result(&gw, "q6").starts_with("x.txt"),
        "{}",
        tool_result(&gw, "q6")
    );
}

/// Attack 8 (exec): the provider key and the worker token were visible to `exec`; output past
/// the cap killed the command with SIGPIPE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_gets_a_minimal_environment_and_all_its_output_is_drained_r_e2() {
    let mut gw = Gateway::start_with(
        "api_key_env = \"SECURITY_TEST_KEY\"\n[agents.defaults.tools.exec]\nsecurity = \"full\"\n",
    )
    .await;
    gw.stop(nix::sys::signal::Signal::SIGTERM).await;
    gw.spawn_with_env(&[("SECURITY_TEST_KEY", "sk-leaked-secret")])
        .await;
    gw.model
        .push(call("env", "exec", json!({"command": "env"})));
    gw.model.push(call(
        "big",
        "exec",
        json!({"command": "head -c 300000 /dev/zero | tr '\\0' x; echo \"status=$?\" > big.status"}),
    ));
    gw.model.push(reply("done"));
    assert_eq!(run_turn(&gw, "env").await["payload"]["status"], "ok");
    let env = tool_result(&gw, "env");
    assert!(env.contains("PATH="), "{env}");
    for leak in [
        "sk-leaked-secret",
        "LOOPGATE_WORKER_TOKEN",
        "SECURITY_TEST_KEY",
    ] {
        assert!(!env.contains(leak), "{leak} leaked to exec: {env}");
    }
    let status = std::fs::read_to_string(gw.workspace("main").join("big.status")).unwrap();
    assert_eq!(status.trim(), "status=0", "the writer died of SIGPIPE");
    let big = tool_result(&gw, "big");
    assert!(big.contains("truncated"), "{}", &big[big.len() - 200..]);
    gw.logs.assert_clean(&[]);
}

fn read_pid(path: &std::path::Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

/// Attack 8 (processes): `exec` children (`cmd &`, `setsid`) outlived their run, and every
/// child outlived a SIGKILLed worker. Now every process an exec starts dies when the command
/// ends and when its worker dies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_children_die_with_the_command_and_the_worker_r_e2() {
    let gw = Gateway::start_with("[agents.defaults.tools.exec]\nsecurity = \"full\"\n").await;
    let ws = gw.workspace("main");
    gw.model.push(call(
        "bg",
        "exec",
        json!({"command": "sleep 300 & echo $! > bg.pid; setsid sleep 300 & echo $! > sid.pid; (setsid sh -c 'sleep 300 & echo $! > deep.pid; wait' &); while [ ! -s deep.pid ]; do :; done; echo started"}),
    ));
    gw.model.push(reply("done"));
    assert_eq!(run_turn(&gw, "bg").await["payload"]["status"], "ok");
    for f in ["bg.pid", "sid.pid", "deep.pid"] {
        let pid = read_pid(&ws.join(f));
        assert!(
            loopgate_tests::gone_within(pid, WAIT).await.is_some(),
            "{f}: process {pid} outlived its exec"
        );
    }

    // A command still running when its worker is SIGKILLed.
    gw.model.push(call(
        "hang",
        "exec",
        json!({"command": "setsid sleep 300 & echo $! > orphan.pid; echo started; wait"}),
    ));
    let mut c = gw.connect().await;
    let mut params = loopgate_tests::client::connect_params();
    params["caps"] = json!(["tool-events"]);
    let mut events = loopgate_tests::Client::connect_with(&gw.socket(), params).await;
    let _id = c
        .send(
            "agent",
            json!({"message": "hang", "idempotencyKey": "hang"}),
        )
        .await;
    events
        .agent_event("hang", |p| {
            p["stream"] == "tool" && p["data"]["phase"] == "update"
        })
        .await;
    let orphan = read_pid(&ws.join("orphan.pid"));
    assert!(loopgate_tests::alive(orphan));
    let worker = gw.worker_pid("main").await.expect("worker pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        loopgate_tests::gone_within(orphan, WAIT).await.is_some(),
        "process {orphan} outlived its SIGKILLed worker"
    );
    gw.logs
        .assert_clean(&["worker", "Worker", "exited", "signal"]);
}

/// The worker's peak resident memory (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// A hostile provider that streams without ever ending a line no longer grows the worker's
/// stream buffer without limit: the run fails at the 8 MiB line cap, the worker stays small
/// and serves the next turn. Before, all 256 MiB were buffered (and then some).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_stream_without_line_breaks_is_cut_off_r_e2() {
    let gw = Gateway::start().await;
    gw.model.push(reply("warm"));
    let fin = run_turn(&gw, "flood-0").await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let pid = gw.worker_pid("main").await.unwrap();
    let before = peak_rss(pid);

    gw.model.push(Step::Flood { bytes: 256 << 20 });
    let fin = run_turn(&gw, "flood-1").await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let err = fin["payload"]["error"].as_str().unwrap_or_default();
    assert!(err.contains("line longer than"), "{err}");
    let grew = peak_rss(pid).saturating_sub(before);
    assert!(
        grew < 96 << 20,
        "the worker's peak RSS grew by {grew} bytes"
    );

    gw.model.push(reply("still here"));
    let fin = run_turn(&gw, "flood-2").await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(gw.worker_pid("main").await, Some(pid));
    gw.logs.assert_clean(&["line longer than"]);
}
