//! `apply_patch` (issue 40), as OpenClaw 2026.9.6 answers it (`tools-cron-2026.9.6.md`
//! section 3): the Codex patch format over the workspace, OpenClaw's result and error texts,
//! paths confined as the other file tools' are (R-F1); better than OpenClaw on purpose, a
//! patch applies to all its files or to none.

use loopgate_tests::{reply, tool_call, tool_result, Gateway};
use serde_json::json;

/// Runs one `apply_patch` call with `patch` in a turn; the text the model got back.
async fn patched(gw: &Gateway, id: &str, patch: &str) -> String {
    gw.model.push(tool_call(
        id,
        "apply_patch",
        &json!({ "input": patch }).to_string(),
    ));
    gw.model.push(reply("done"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "patch it", "idempotencyKey": id}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    tool_result(gw, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorded_forms_apply_as_openclaw_reports_them_r_f1() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::create_dir_all(ws.join("notes")).unwrap();
    std::fs::write(ws.join("notes/p.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let out = patched(
        &gw,
        "ap-1",
        "*** Begin Patch\n*** Add File: notes/new.txt\n+first line\n+second line\n\
         *** Update File: notes/p.txt\n@@\n alpha\n-beta\n+BETA\n gamma\n\
         *** End Patch",
    )
    .await;
    assert_eq!(
        out,
        "Success. Updated the following files:\nA notes/new.txt\nM notes/p.txt"
    );
    let read = |p: &str| std::fs::read_to_string(ws.join(p)).unwrap();
    assert_eq!(read("notes/new.txt"), "first line\nsecond line\n");
    assert_eq!(read("notes/p.txt"), "alpha\nBETA\ngamma\n");
    let out = patched(
        &gw,
        "ap-2",
        "*** Begin Patch\n*** Update File: notes/p.txt\n*** Move to: notes/moved.txt\n@@\n+appended\n*** End of File\n\
         *** Delete File: notes/new.txt\n*** Add File: notes/z.txt\n+z\n*** End Patch",
    )
    .await;
    assert_eq!(
        out,
        "Success. Updated the following files:\nA notes/z.txt\nM notes/moved.txt\nD notes/new.txt"
    );
    assert_eq!(read("notes/moved.txt"), "alpha\nBETA\ngamma\nappended\n");
    assert!(!ws.join("notes/p.txt").exists() && !ws.join("notes/new.txt").exists());
    gw.logs.assert_clean(&[]);
}

/// Acceptance of issue 40: a patch whose second file does not apply changes no file
/// (OpenClaw leaves the first one changed), and says what it did not find, as OpenClaw's
/// JSON error. A path out of the workspace and a file that exists already are refused in
/// OpenClaw's words, creating nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_with_one_failing_file_changes_no_file_r_f1() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(ws.join("b.txt"), "three\nfour\n").unwrap();
    let out = patched(
        &gw,
        "ap-3",
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n\
         *** Update File: b.txt\n@@\n three\n-nosuchline\n*** Add File: c.txt\n+c\n*** End Patch",
    )
    .await;
    let root = std::fs::canonicalize(&ws).unwrap();
    // OpenClaw's shape, its keys in its order.
    let error = format!(
        "Failed to find expected lines in {}:\nthree\nnosuchline",
        root.join("b.txt").display()
    );
    let want = format!(
        "{{\n  \"status\": \"error\",\n  \"tool\": \"apply_patch\",\n  \"error\": {}\n}}",
        serde_json::to_string(&error).unwrap()
    );
    assert_eq!(out, want);
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(!ws.join("c.txt").exists());

    let out = patched(
        &gw,
        "ap-4",
        "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch",
    )
    .await;
    assert!(
        out.contains(&format!(
            "Path escapes sandbox root ({}): ../escape.txt",
            ws.display()
        )),
        "{out}"
    );
    assert!(!ws.parent().unwrap().join("escape.txt").exists());
    let out = patched(
        &gw,
        "ap-5",
        "*** Begin Patch\n*** Add File: a.txt\n+again\n*** End Patch",
    )
    .await;
    assert!(
        out.contains("Cannot create a.txt: the file already exists. Use \\\"*** Update File: a.txt\\\" to change it, or delete it earlier in the same patch."),
        "{out}"
    );
    let out = patched(&gw, "ap-6", "*** Add File: x\n+y\n*** End Patch").await;
    assert!(
        out.contains("The first line of the patch must be '*** Begin Patch'"),
        "{out}"
    );
    gw.logs.assert_clean(&[]);
}

/// Found by the hostile review: deleting a link deleted what it pointed to; a file over
/// the read cap was patched from its first 64 MiB (the rest lost). A deleted link is the
/// link; a file too large to patch is refused, unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_link_is_the_link_and_a_huge_file_is_refused_r_f1() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("real.txt"), "keep me\n").unwrap();
    std::os::unix::fs::symlink("real.txt", ws.join("link")).unwrap();
    let out = patched(
        &gw,
        "ap-7",
        "*** Begin Patch\n*** Delete File: link\n*** End Patch",
    )
    .await;
    assert_eq!(out, "Success. Updated the following files:\nD link");
    assert!(ws.join("link").symlink_metadata().is_err(), "the link went");
    assert_eq!(
        std::fs::read_to_string(ws.join("real.txt")).unwrap(),
        "keep me\n"
    );
    let big = "x\n".repeat(9 << 20);
    std::fs::write(ws.join("big.log"), &big).unwrap();
    let out = patched(
        &gw,
        "ap-8",
        "*** Begin Patch\n*** Update File: big.log\n@@\n+tail\n*** End of File\n*** End Patch",
    )
    .await;
    assert!(out.contains("larger than 16 MiB"), "{out}");
    assert_eq!(
        std::fs::metadata(ws.join("big.log")).unwrap().len(),
        big.len() as u64
    );
    let leftovers: Vec<_> = std::fs::read_dir(&ws)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".apply_patch."))
        .collect();
    assert!(leftovers.is_empty(), "no staged files left");
    gw.logs.assert_clean(&[]);
}
