//! `memory_search` and `memory_get` (issue 40), as OpenClaw 2026.9.6 answers them with its
//! keyword search (`tools-cron-2026.9.6.md` section 5): results with path, lines, snippet
//! and citation; excerpts with continuation; only memory files readable (R-F1). Better than
//! OpenClaw on purpose: a line written a moment before is found at once (OpenClaw's index
//! lagged a minute).

use loopgate_tests::{reply, tool_call, tool_result, Gateway};
use serde_json::{json, Value};

/// Runs the calls `(id, tool, args)` in one turn; each call's result, as JSON.
async fn called(gw: &Gateway, key: &str, calls: &[(&str, &str, Value)]) -> Vec<Value> {
    for (id, tool, args) in calls {
        gw.model.push(tool_call(id, tool, &args.to_string()));
    }
    gw.model.push(reply("done"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "remember", "idempotencyKey": key}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    calls
        .iter()
        .map(|(id, _, _)| {
            let text = tool_result(gw, id);
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
        })
        .collect()
}

/// Acceptance of issue 40: `memory_search` finds a line `write` added a moment before, in
/// the same turn, with OpenClaw's fields; a file outside memory is never a result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_search_finds_a_line_written_a_moment_before_r_f1() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("MEMORY.md"), "# Memory\n\n- The deploy password rotation happens on Tuesdays.\n- Favourite fruit of the ops team: kumquat.\n").unwrap();
    std::fs::write(ws.join("AGENTS.md"), "BLUEHERON-7 is also named here.\n").unwrap();
    let out = called(
        &gw,
        "mem-1",
        &[
            ("m1", "memory_search", json!({"query": "kumquat"})),
            (
                "m2",
                "write",
                json!({"path": "memory/2026-12-01.md", "content": "# 2026-12-01\n\nMeeting notes: the staging cluster is named BLUEHERON-7.\n"}),
            ),
            ("m3", "memory_search", json!({"query": "BLUEHERON-7"})),
            ("m4", "memory_search", json!({"query": "nothing-like-this"})),
        ],
    )
    .await;
    let hit = &out[0]["results"][0];
    assert_eq!(hit["path"], "MEMORY.md", "{}", out[0]);
    assert_eq!(
        (hit["startLine"].as_u64(), hit["endLine"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(hit["citation"], "MEMORY.md#L4");
    assert_eq!(
        hit["snippet"],
        "- Favourite fruit of the ops team: kumquat.\n\nSource: MEMORY.md#L4"
    );
    assert_eq!(
        (
            hit["source"].as_str(),
            hit["corpus"].as_str(),
            hit["score"].as_f64()
        ),
        (Some("memory"), Some("memory"), Some(1.0))
    );
    assert_eq!(
        (out[0]["provider"].as_str(), out[0]["citations"].as_str()),
        (Some("none"), Some("auto"))
    );
    let found = out[2]["results"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{}", out[2]);
    assert_eq!(found[0]["path"], "memory/2026-12-01.md");
    assert_eq!(
        (found[0]["startLine"].as_u64(), found[0]["endLine"].as_u64()),
        (Some(1), Some(3))
    );
    assert!(found[0]["snippet"]
        .as_str()
        .unwrap()
        .contains("named BLUEHERON-7."));
    assert_eq!(out[3]["results"], json!([]));
    gw.logs.assert_clean(&[]);
}

/// `memory_get` as OpenClaw answers it: a whole file, an excerpt with where to go on, a
/// missing memory file as `not_found` (not an error), and any other file refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_get_reads_memory_files_only_r_f1() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::write(
        ws.join("MEMORY.md"),
        "# Memory\n\n- The deploy password rotation happens on Tuesdays.\n- kumquat\n",
    )
    .unwrap();
    std::fs::write(ws.join("memory/2026-12-01.md"), "# 2026-12-01\n\nnotes\n").unwrap();
    std::fs::write(ws.join("AGENTS.md"), "not memory\n").unwrap();
    std::os::unix::fs::symlink("../AGENTS.md", ws.join("memory/link.md")).unwrap();
    nix::unistd::mkfifo(&ws.join("memory/fifo.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let out = called(
        &gw,
        "mem-2",
        &[
            ("g1", "memory_get", json!({"path": "memory/2026-12-01.md"})),
            (
                "g2",
                "memory_get",
                json!({"path": "MEMORY.md", "from": 3, "lines": 1}),
            ),
            ("g3", "memory_get", json!({"path": "memory/none.md"})),
            ("g4", "memory_get", json!({"path": "AGENTS.md"})),
            ("g5", "memory_get", json!({"path": "memory/../AGENTS.md"})),
            ("g6", "memory_get", json!({"path": "memory/link.md"})),
            ("g7", "memory_get", json!({"path": "memory/fifo.md"})),
            ("g8", "memory_search", json!({"query": "memory"})),
        ],
    )
    .await;
    assert_eq!(
        out[0],
        json!({"status": "ok", "text": "# 2026-12-01\n\nnotes", "path": "memory/2026-12-01.md", "from": 1, "lines": 3})
    );
    assert_eq!(
        out[1],
        json!({"status": "ok", "text": "- The deploy password rotation happens on Tuesdays.\n\n[More content available. Use from=4 to continue.]", "path": "MEMORY.md", "from": 3, "lines": 1, "truncated": true, "nextFrom": 4})
    );
    assert_eq!(
        out[2],
        json!({"status": "not_found", "text": "", "path": "memory/none.md"})
    );
    for (i, p) in [
        (3, "AGENTS.md"),
        (4, "memory/../AGENTS.md"),
        (5, "memory/link.md"),
    ] {
        assert_eq!(
            out[i],
            json!({"status": "error", "text": "", "path": p, "code": "MEMORY_PATH_NOT_ALLOWED", "error": "path is not an allowed Markdown memory file"})
        );
    }
    // A FIFO is refused at once (it would block the read for good), and a search walks
    // past it and the link.
    assert_eq!(out[6]["status"], "error", "{}", out[6]);
    assert_eq!(out[6]["code"], "MEMORY_READ_FAILED");
    let paths: Vec<&str> = out[7]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["path"].as_str())
        .collect();
    assert!(
        !paths.contains(&"memory/link.md") && !paths.contains(&"memory/fifo.md"),
        "{paths:?}"
    );
    gw.logs.assert_clean(&[]);
}
