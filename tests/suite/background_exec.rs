//! Background `exec` and `process` (issue 40), as OpenClaw 2026.9.6 answers them
//! (`tools-cron-2026.9.6.md` section 2): the "still running" result with a session slug,
//! polls that return only new output, the whole process group killed and gone when `kill`
//! answers, and sessions never orphaned unseen when the worker restarts (R-F1).

use std::time::Duration;

use loopgate_tests::{alive, gone_within, reply, tool_call, tool_result, Gateway};
use serde_json::{json, Value};

const FULL: &str = "[agents.defaults.tools.exec]\nsecurity = \"full\"\n";

/// Runs the calls `(id, tool, args)` in one turn; each call's result text.
async fn called(gw: &Gateway, key: &str, calls: &[(&str, &str, Value)]) -> Vec<String> {
    for (id, tool, args) in calls {
        gw.model.push(tool_call(id, tool, &args.to_string()));
    }
    gw.model.push(reply("done"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "work", "idempotencyKey": key}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    calls.iter().map(|(id, _, _)| tool_result(gw, id)).collect()
}

/// The session id and pid of a "Command still running" result.
fn session_of(text: &str) -> (String, u32) {
    let rest = text
        .strip_prefix("Command still running (session ")
        .unwrap_or_else(|| panic!("not running: {text}"));
    let (id, rest) = rest.split_once(", pid ").unwrap();
    let (pid, tail) = rest.split_once(')').unwrap();
    assert_eq!(
        tail,
        ". Use process (list/poll/log/write/send-keys/submit/paste/kill/clear/remove) for follow-up."
    );
    (id.to_owned(), pid.parse().unwrap())
}

/// Acceptance of issue 40: a background command polled to completion. Polls return only
/// what is new, with OpenClaw's status lines; stdin written through `process submit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_exec_is_polled_to_completion_r_f1() {
    let gw = Gateway::start_with(FULL).await;
    let out = called(
        &gw,
        "bg-1",
        &[(
            "b1",
            "exec",
            json!({"command": "read x; echo got:$x", "background": true, "pty": true}),
        )],
    )
    .await;
    let (id, _) = session_of(&out[0]);
    assert_eq!(id.split('-').count(), 2, "{id}");
    let s = |extra: Value| {
        let mut v = json!({"sessionId": id});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let out = called(
        &gw,
        "bg-2",
        &[
            ("p1", "process", json!({"action": "list"})),
            ("p2", "process", s(json!({"action": "poll"}))),
            (
                "p3",
                "process",
                s(json!({"action": "submit", "data": "hello", "eof": true})),
            ),
            (
                "p4",
                "process",
                s(json!({"action": "poll", "timeout": 20000})),
            ),
            (
                "p5",
                "process",
                s(json!({"action": "poll", "timeout": 20000})),
            ),
            ("p6", "process", s(json!({"action": "log"}))),
            ("p7", "process", json!({"action": "list"})),
        ],
    )
    .await;
    assert!(
        out[0].starts_with(&format!("{id} running   ")) && out[0].ends_with(" :: read x;"),
        "{}",
        out[0]
    );
    assert_eq!(out[1], "(no new output)\n\nProcess still running.");
    assert_eq!(
        out[2],
        format!("Wrote 6 bytes to session {id} and closed its input.")
    );
    assert!(out[3].starts_with("got:hello\n\nProcess "), "{}", out[3]);
    assert_eq!(out[4], "(no new output)\n\nProcess exited with code 0.");
    assert_eq!(out[5], "got:hello");
    assert!(
        out[6].starts_with(&format!("{id} completed ")),
        "{}",
        out[6]
    );
    // A finished session is forgotten by `clear`; an unknown one is OpenClaw's error.
    let out = called(
        &gw,
        "bg-3",
        &[
            ("c1", "process", s(json!({"action": "clear"}))),
            ("c2", "process", s(json!({"action": "poll"}))),
            (
                "c3",
                "exec",
                json!({"command": "echo hi-foreground", "yieldMs": 20000}),
            ),
        ],
    )
    .await;
    assert_eq!(out[0], format!("Cleared session {id}."));
    assert_eq!(out[1], format!("No session found for {id}"));
    assert_eq!(out[2], "hi-foreground\n");
    gw.logs.assert_clean(&[]);
}

/// Pids of the processes whose command line is `words`.
fn pids_running(words: &[&str]) -> Vec<u32> {
    let want = words.join("\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).trim_end_matches('\0') == want)
        })
        .collect()
}

/// Acceptance of issue 40: `process kill` stops the command and everything it started,
/// one that left the group with `setsid` too, and every one is gone when it answers; a
/// `yieldMs` call still running then becomes a session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_kill_leaves_no_process_of_the_command_r_f1() {
    let gw = Gateway::start_with(FULL).await;
    let tag = format!("{}", std::process::id());
    let (a, b) = (format!("317{tag}"), format!("318{tag}"));
    let out = called(
        &gw,
        "k-1",
        &[(
            "k1",
            "exec",
            json!({"command": format!("setsid sleep {b} & sleep {a}"), "yieldMs": 200}),
        )],
    )
    .await;
    let (id, pid) = session_of(&out[0]);
    let mut found = Vec::new();
    for _ in 0..500 {
        found = [pids_running(&["sleep", &a]), pids_running(&["sleep", &b])].concat();
        if found.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(found.len(), 2, "both sleeps started");
    let out = called(
        &gw,
        "k-2",
        &[
            ("k2", "process", json!({"action": "kill", "sessionId": id})),
            ("k3", "process", json!({"action": "poll", "sessionId": id})),
            ("k4", "process", json!({"action": "list"})),
        ],
    )
    .await;
    assert_eq!(out[0], format!("Termination requested for session {id}."));
    for p in found.iter().chain([&pid]) {
        assert!(!alive(*p), "process {p} outlived process kill");
    }
    assert_eq!(
        out[1],
        "(no new output)\n\nProcess stopped by request (signal SIGTERM)."
    );
    assert!(
        out[2].starts_with(&format!("{id} failed    ")),
        "{}",
        out[2]
    );
    gw.logs.assert_clean(&[]);
}

/// A command that stops its own reaper (so the reaper cannot run its kill round) and
/// leaves the process group is still killed, and `kill` answers only once it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_stops_its_reaper_is_still_killed_r_f1() {
    let gw = Gateway::start_with(FULL).await;
    let b = format!("327{}", std::process::id());
    let out = called(
        &gw,
        "s-1",
        &[(
            "s1",
            "exec",
            json!({"command": format!("setsid sleep {b} </dev/null >/dev/null 2>&1 & kill -STOP $PPID; sleep 1000"), "background": true}),
        )],
    )
    .await;
    let (id, _) = session_of(&out[0]);
    let mut escaped = Vec::new();
    for _ in 0..500 {
        escaped = pids_running(&["sleep", &b]);
        if !escaped.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(escaped.len(), 1, "the escapee started");
    let out = called(
        &gw,
        "s-2",
        &[("s2", "process", json!({"action": "kill", "sessionId": id}))],
    )
    .await;
    assert_eq!(out[0], format!("Termination requested for session {id}."));
    assert!(
        !alive(escaped[0]),
        "the escaped process outlived process kill"
    );
    gw.logs.assert_clean(&[]);
}

/// A worker that dies with a session running takes the command with it, and the next
/// worker reports the session as stopped, to the model in the turn's context and to
/// `process`: never a silent orphan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_a_dead_worker_are_reported_not_orphaned_r_f1() {
    let gw = Gateway::start_with(FULL).await;
    let secs = format!("319{}", std::process::id());
    let out = called(
        &gw,
        "w-1",
        &[(
            "w1",
            "exec",
            json!({"command": format!("sleep {secs}"), "background": true}),
        )],
    )
    .await;
    let (id, pid) = session_of(&out[0]);
    let worker = gw.worker_pid("main").await.expect("worker pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(gone_within(pid, Duration::from_secs(10)).await.is_some());
    let out = called(
        &gw,
        "w-2",
        &[("w2", "process", json!({"action": "poll", "sessionId": id}))],
    )
    .await;
    assert_eq!(
        out[0],
        "(no new output)\n\nProcess was stopped when the agent's worker restarted; its output is gone."
    );
    let reqs = gw.model.requests();
    let system = reqs.last().unwrap().body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains(&format!("Active exec sessions:\n- {id} stopped when the agent's worker restarted (not running) :: sleep {secs}")),
        "{system}"
    );
    assert!(pids_running(&["sleep", &secs]).is_empty());
    gw.logs
        .assert_clean(&["worker", "Worker", "exited", "signal"]);
}
