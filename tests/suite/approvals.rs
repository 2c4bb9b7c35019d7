//! Exec approvals (`tools.exec.security = "ask"`, R-B5, R-F4): allowlisted commands run;
//! others wait for an operator (`exec.approval.requested`), who allows them once, for good
//! (kept across restarts) or denies them; unresolved past the timeout they are denied; the
//! wait does not consume the run's budget.

use loopgate_tests::{reply, tool_call, tool_result, Client, Gateway};
use nix::sys::signal::Signal;
use scripted_model::Step;
use serde_json::{json, Value};

const ASK: &str =
    "[agents.defaults.tools.exec]\nsecurity = \"ask\"\nallowlist = [\"echo listed *\"]\n";

fn exec(id: &str, command: &str) -> Step {
    tool_call(id, "exec", &json!({ "command": command }).to_string())
}

/// Starts a run and returns (request id, the approval it waits for).
async fn asks(c: &mut Client, run: &str, extra: Value) -> (String, Value) {
    let mut p = json!({"message": "go", "idempotencyKey": run, "sessionKey": run});
    if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let req = c.send("agent", p).await;
    let acc = c.res(&req).await;
    assert_eq!(acc["payload"]["status"], "accepted", "{acc}");
    let ev = c
        .wait_for(|f| {
            f["event"] == "exec.approval.requested" && f["payload"]["request"]["runId"] == run
        })
        .await;
    (req, ev["payload"].clone())
}

async fn resolve(c: &mut Client, id: &str, decision: &str) -> Value {
    c.call(
        "exec.approval.resolve",
        json!({"id": id, "decision": decision}),
    )
    .await
}

/// allow-once: the command runs once; the request and its resolution reach operators in
/// OpenClaw's shapes and the list shows it while it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_once_command_runs_and_the_next_asks_again() {
    let gw = Gateway::start_with(ASK).await;
    gw.model.push(exec("c1", "echo approved"));
    gw.model.push(reply("ran it"));
    // A client without `operator.approvals` never hears of approvals.
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.read"]);
    let mut reader = Client::connect_with(&gw.socket(), params).await;
    let mut c = gw.connect().await;
    let (req, approval) = asks(&mut c, "ap-1", json!({})).await;
    assert_eq!(approval["approvalKind"], "exec");
    assert_eq!(approval["request"]["command"], "echo approved");
    assert_eq!(
        approval["request"]["commandArgv"],
        json!(["echo", "approved"])
    );
    assert_eq!(approval["request"]["sessionKey"], "agent:main:ap-1");
    assert_eq!(
        approval["request"]["allowedDecisions"],
        json!(["allow-once", "allow-always", "deny"])
    );
    assert!(approval["expiresAtMs"].as_u64() > approval["createdAtMs"].as_u64());
    let id = approval["id"].as_str().unwrap().to_owned();
    let list = c.call("exec.approval.list", json!({})).await;
    assert_eq!(list["payload"][0]["id"], id.as_str(), "{list}");
    // The CLI sees it too.
    let out = gw.cli(&["approvals", "list"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("echo approved"));
    let r = resolve(&mut c, &id[..8], "allow-once").await;
    assert_eq!(
        r["payload"],
        json!({"ok": true}),
        "a unique prefix is enough: {r}"
    );
    let done = c
        .wait_for(|f| f["event"] == "exec.approval.resolved" && f["payload"]["id"] == id.as_str())
        .await;
    assert_eq!(done["payload"]["decision"], "allow-once");
    let fin = c.res(&req).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(
        tool_result(&gw, "c1").starts_with("approved"),
        "{}",
        tool_result(&gw, "c1")
    );
    reader
        .wait_for(|f| {
            f["event"] == "chat"
                && f["payload"]["runId"] == "ap-1"
                && f["payload"]["state"] == "final"
        })
        .await;
    assert!(
        !reader.seen.iter().any(|f| f["event"]
            .as_str()
            .is_some_and(|e| e.starts_with("exec.approval"))),
        "a read-only client got approval events"
    );
    // Decided: a second decision is refused by name; the list is empty.
    let again = resolve(&mut c, &id, "deny").await;
    assert_eq!(
        again["error"]["details"]["reason"], "APPROVAL_ALREADY_RESOLVED",
        "{again}"
    );
    let none = resolve(&mut c, "no-such-id", "deny").await;
    assert_eq!(
        none["error"]["details"]["reason"], "APPROVAL_NOT_FOUND",
        "{none}"
    );
    assert_eq!(
        c.call("exec.approval.list", json!({})).await["payload"],
        json!([])
    );
    // An allowlisted command never asks.
    gw.model.push(exec("c2", "echo listed yes"));
    gw.model.push(reply("fine"));
    let (_, fin) = c
        .turn(json!({"message": "go", "idempotencyKey": "ap-2", "sessionKey": "ap-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    assert!(tool_result(&gw, "c2").starts_with("listed yes"));
}

/// allow-always: the exact command joins the agent's allowlist, and stays there after a
/// restart: the next run of it does not ask. `loopgate approvals patterns` lists it and
/// `revoke` forgets it (the worker restarts without it; it stays forgotten).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_persists_across_a_restart() {
    let mut gw = Gateway::start_with(ASK).await;
    gw.model.push(exec("a1", "echo for good"));
    gw.model.push(reply("ok"));
    let mut c = gw.connect().await;
    let (req, approval) = asks(&mut c, "aa-1", json!({})).await;
    let out = gw
        .cli(&[
            "approvals",
            "allow",
            approval["id"].as_str().unwrap(),
            "--always",
        ])
        .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(c.res(&req).await["payload"]["status"], "ok");
    assert!(tool_result(&gw, "a1").starts_with("for good"));
    gw.stop(Signal::SIGTERM).await;
    gw.spawn().await;
    gw.model.push(exec("a2", "echo for good"));
    gw.model.push(reply("again"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "go", "idempotencyKey": "aa-2", "sessionKey": "aa-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(tool_result(&gw, "a2").starts_with("for good"));
    assert!(
        !c.seen
            .iter()
            .any(|f| f["event"] == "exec.approval.requested"),
        "it did not ask again"
    );
    // Another command still asks.
    gw.model.push(exec("a3", "echo for good twice"));
    gw.model.push(reply("asked"));
    let (req, approval) = asks(&mut c, "aa-3", json!({})).await;
    resolve(&mut c, approval["id"].as_str().unwrap(), "deny").await;
    assert_eq!(c.res(&req).await["payload"]["status"], "ok");
    // The operator lists what is allowed for good and revokes it: the running worker
    // restarts without it, and the command asks again.
    let out = gw.cli(&["approvals", "patterns", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let kept: Value = serde_json::from_slice(&out.stdout).unwrap();
    let patterns = kept["patterns"].as_array().unwrap();
    assert_eq!(patterns.len(), 1, "{kept}");
    assert_eq!(patterns[0]["agentId"], "main", "{kept}");
    let pattern = patterns[0]["pattern"].as_str().unwrap().to_owned();
    let text = gw.cli(&["approvals", "patterns"]).await;
    assert!(
        String::from_utf8_lossy(&text.stdout).contains(&pattern),
        "{text:?}"
    );
    let before = gw.worker_pid("main").await;
    let out = gw.cli(&["approvals", "revoke", "main", &pattern]).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("revoked; its worker restarted without it"),
        "{said}"
    );
    assert_ne!(gw.worker_pid("main").await, before, "a new worker");
    let out = gw.cli(&["approvals", "patterns"]).await;
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("No commands are allowed for good"),
        "{out:?}"
    );
    gw.model.push(exec("a4", "echo for good"));
    gw.model.push(reply("asked again"));
    let (req, approval) = asks(&mut c, "aa-4", json!({})).await;
    resolve(&mut c, approval["id"].as_str().unwrap(), "deny").await;
    assert_eq!(c.res(&req).await["payload"]["status"], "ok");
    // Revoking what is not kept says so.
    let out = gw.cli(&["approvals", "revoke", "main", &pattern]).await;
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no command allowed for good"),
        "{out:?}"
    );
    // And after a restart it stays revoked.
    gw.stop(Signal::SIGTERM).await;
    gw.spawn().await;
    let out = gw.cli(&["approvals", "patterns", "--json"]).await;
    let kept: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(kept["patterns"], json!([]), "{kept}");
}

/// Issue 23 item 5: allow-always was withheld only for a deny-list of argv[0]'s basename,
/// so it was offered for `stdbuf -o0 python3 build.py` (the model writes `build.py`, and
/// every later run of it would run unasked). Only programs on the safe list, looked for
/// through wrappers, get it: the request does not offer it, and a client that sends it
/// anyway is refused, the run still waiting for a decision it can take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_is_only_for_the_safe_list_through_wrappers() {
    let gw = Gateway::start_with(ASK).await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("build.py"), "open('ran', 'w')\n").unwrap();
    gw.model.push(exec("w1", "stdbuf -o0 python3 build.py"));
    gw.model.push(exec("w2", "timeout 5 echo wrapped"));
    gw.model.push(reply("done"));
    let mut c = gw.connect().await;
    let (req, approval) = asks(&mut c, "sl-1", json!({})).await;
    assert_eq!(
        approval["request"]["command"],
        "stdbuf -o0 python3 build.py"
    );
    assert_eq!(
        approval["request"]["allowedDecisions"],
        json!(["allow-once", "deny"]),
        "{approval}"
    );
    let id = approval["id"].as_str().unwrap().to_owned();
    let r = resolve(&mut c, &id, "allow-always").await;
    assert_eq!(
        r["error"]["details"]["reason"], "APPROVAL_ALLOW_ALWAYS_UNAVAILABLE",
        "{r}"
    );
    let out = gw.cli(&["approvals", "allow", &id, "--always"]).await;
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    // Still pending: the operator denies it.
    assert_eq!(resolve(&mut c, &id, "deny").await["payload"]["ok"], true);
    // A safe program behind a wrapper is offered allow-always.
    let approval = c
        .wait_for(|f| {
            f["event"] == "exec.approval.requested"
                && f["payload"]["request"]["command"] == "timeout 5 echo wrapped"
        })
        .await;
    assert_eq!(
        approval["payload"]["request"]["allowedDecisions"],
        json!(["allow-once", "allow-always", "deny"])
    );
    let id = approval["payload"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        resolve(&mut c, &id, "allow-always").await["payload"]["ok"],
        true
    );
    assert_eq!(c.res(&req).await["payload"]["status"], "ok");
    assert!(tool_result(&gw, "w1").contains("user-denied"));
    assert!(tool_result(&gw, "w2").starts_with("wrapped"));
    assert!(!ws.join("ran").exists());
    let out = gw.cli(&["approvals", "patterns", "--json"]).await;
    let kept: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        kept["patterns"],
        json!([{"agentId": "main", "pattern": "timeout 5 echo wrapped"}]),
        "{kept}"
    );
}

/// deny, and no decision within the timeout: the model gets OpenClaw's denial text, the
/// command never runs, and the reply carries the failure although the model answered
/// (R-F4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_and_expired_commands_do_not_run_and_the_reply_says_so_r_f4() {
    let gw = Gateway::start_with(&format!("{ASK}approval_timeout_seconds = 1\n")).await;
    let ws = gw.workspace("main");
    gw.model.push(exec("d1", "touch denied.txt"));
    gw.model.push(reply("I was not allowed."));
    let mut c = gw.connect().await;
    let (req, approval) = asks(&mut c, "dn-1", json!({})).await;
    let id = approval["id"].as_str().unwrap().to_owned();
    assert_eq!(resolve(&mut c, &id, "deny").await["payload"]["ok"], true);
    let fin = c.res(&req).await;
    assert_eq!(
        tool_result(&gw, "d1"),
        format!("Exec denied (gateway id={id}, user-denied): touch denied.txt")
    );
    let texts: Vec<&str> = fin["payload"]["result"]["payloads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(texts[0], "I was not allowed.", "{fin}");
    assert!(
        texts[1].contains("The exec tool failed: Exec denied"),
        "{fin}"
    );
    // Nobody answers: denied when the timeout passes, announced with `resolvedBy: null`.
    gw.model.push(exec("d2", "touch expired.txt"));
    gw.model.push(reply("Nobody answered."));
    let (req, approval) = asks(&mut c, "dn-2", json!({})).await;
    let id = approval["id"].as_str().unwrap().to_owned();
    let done = c
        .wait_for(|f| f["event"] == "exec.approval.resolved" && f["payload"]["id"] == id.as_str())
        .await;
    assert_eq!(done["payload"]["decision"], "deny");
    assert_eq!(done["payload"]["resolvedBy"], Value::Null);
    assert_eq!(c.res(&req).await["payload"]["status"], "ok");
    assert_eq!(
        tool_result(&gw, "d2"),
        format!("Exec denied (gateway id={id}, approval-timeout): touch expired.txt")
    );
    assert!(!ws.join("denied.txt").exists() && !ws.join("expired.txt").exists());
}

/// R-B5: a run with a 2 s budget that waits 5 s for an operator still completes: the wait
/// is not part of the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_wait_does_not_consume_the_run_budget_r_b5() {
    let gw = Gateway::start_with(ASK).await;
    gw.model.push(exec("b1", "echo slow approval"));
    gw.model.push(reply("done in time"));
    let mut c = gw.connect().await;
    let (req, approval) = asks(&mut c, "bg-1", json!({"timeout": 2})).await;
    // The operator takes 5 s (the scenario, not a synchronisation).
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let r = resolve(&mut c, approval["id"].as_str().unwrap(), "allow-once").await;
    assert_eq!(r["payload"]["ok"], true, "{r}");
    let fin = c.res(&req).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(tool_result(&gw, "b1").starts_with("slow approval"));
}

/// An exec that `tools.allow` leaves out is refused as such: no operator is asked about a
/// command that could never run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_left_out_of_tools_allow_asks_no_operator() {
    let gw = Gateway::start_with(
        "[agents.defaults.tools]\nallow = [\"read\"]\n[agents.defaults.tools.exec]\nsecurity = \"ask\"\n",
    )
    .await;
    gw.model.push(exec("n1", "echo sneaky"));
    gw.model.push(reply("refused"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "go", "idempotencyKey": "na-1", "sessionKey": "na-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(
        tool_result(&gw, "n1").contains("not enabled for this agent"),
        "{}",
        tool_result(&gw, "n1")
    );
    assert!(
        !c.seen
            .iter()
            .any(|f| f["event"] == "exec.approval.requested"),
        "no operator was asked"
    );
}
