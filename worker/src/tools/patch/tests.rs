use super::*;

fn patch(body: &str) -> String {
    format!("*** Begin Patch\n{body}\n*** End Patch")
}

/// The recorded forms (`tools-cron-2026.9.6.md` section 3): add, update with a hunk, move,
/// delete, a hunk at the end of the file.
#[test]
fn the_recorded_forms_parse() {
    let ops = parse(&patch(
        "*** Add File: notes/new.txt\n+first line\n+second line\n\
         *** Update File: notes/p.txt\n*** Move to: notes/moved.txt\n@@\n alpha\n-beta\n+BETA\n gamma\n\
         @@\n+appended\n*** End of File\n\
         *** Delete File: old.txt",
    ))
    .unwrap();
    assert_eq!(
        ops[0],
        FileOp::Add {
            path: "notes/new.txt".into(),
            text: "first line\nsecond line\n".into()
        }
    );
    let FileOp::Update {
        path,
        move_to,
        chunks,
    } = &ops[1]
    else {
        panic!("{ops:?}")
    };
    assert_eq!(
        (path.as_str(), move_to.as_deref()),
        ("notes/p.txt", Some("notes/moved.txt"))
    );
    assert_eq!(chunks[0].old, ["alpha", "beta", "gamma"]);
    assert_eq!(chunks[0].new, ["alpha", "BETA", "gamma"]);
    assert!(chunks[1].at_eof && chunks[1].old.is_empty());
    assert_eq!(
        ops[2],
        FileOp::Delete {
            path: "old.txt".into()
        }
    );
}

#[test]
fn malformed_patches_are_refused_in_openclaws_words() {
    assert_eq!(
        parse("*** Add File: x\n+y\n*** End Patch"),
        Err("The first line of the patch must be '*** Begin Patch'".into())
    );
    assert_eq!(
        parse("*** Begin Patch\n*** Add File: x\n+y"),
        Err("The last line of the patch must be '*** End Patch'".into())
    );
    assert_eq!(parse("  "), Err("Invalid patch: input is empty.".into()));
    let e = parse(&patch("*** Frobnicate File: x")).unwrap_err();
    assert!(
        e.starts_with(
            "Invalid patch hunk at line 2: '*** Frobnicate File: x' is not a valid hunk header."
        ),
        "{e}"
    );
    let e = parse(&patch("*** Update File: x\n@@\n*oops")).unwrap_err();
    assert!(
        e.starts_with(
            "Invalid patch hunk at line 4: Unexpected line found in update hunk: '*oops'."
        ),
        "{e}"
    );
    let e = parse(&patch("*** Update File: x")).unwrap_err();
    assert_eq!(
        e,
        "Invalid patch hunk at line 2: Update file hunk for path 'x' is empty"
    );
}

/// Hunks apply in order, each after the last; whitespace at the ends of lines may differ;
/// `*** End of File` anchors at the end; context that is not there is OpenClaw's error with
/// the lines it looked for.
#[test]
fn hunks_apply_in_order_or_say_what_they_did_not_find() {
    let file = "alpha\nbeta\ngamma\nbeta\n";
    let ops = parse(&patch(
        "*** Update File: p\n@@\n alpha\n-beta\n+BETA\n@@\n-beta  \n+LAST\n@@\n+tail\n*** End of File",
    ))
    .unwrap();
    let FileOp::Update { chunks, .. } = &ops[0] else {
        panic!()
    };
    assert_eq!(
        apply_chunks(file, chunks, "/ws/p").unwrap(),
        "alpha\nBETA\ngamma\nLAST\ntail\n"
    );
    let ops = parse(&patch("*** Update File: p\n@@\n alpha\n-nosuchline")).unwrap();
    let FileOp::Update { chunks, .. } = &ops[0] else {
        panic!()
    };
    assert_eq!(
        apply_chunks(file, chunks, "/ws/p"),
        Err("Failed to find expected lines in /ws/p:\nalpha\nnosuchline".into())
    );
    // An anchor names the line the hunk comes after.
    let ops = parse(&patch("*** Update File: p\n@@ gamma\n-beta\n+SECOND")).unwrap();
    let FileOp::Update { chunks, .. } = &ops[0] else {
        panic!()
    };
    assert_eq!(
        apply_chunks(file, chunks, "/ws/p").unwrap(),
        "alpha\nbeta\ngamma\nSECOND\n"
    );
}

/// A hunk that almost matches everywhere in a long file (every line the same but its last)
/// costs the product of their lengths: past a bound the patch is refused, quickly, instead
/// of holding the worker.
#[test]
fn a_pathological_hunk_is_refused_not_ground_through() {
    let file = "a\n".repeat(200_000);
    let mut old = vec!["a".to_owned(); 2_000];
    old.push("b".to_owned());
    let chunks = [Chunk {
        old,
        new: vec!["c".to_owned()],
        ..Chunk::default()
    }];
    let e = apply_chunks(&file, &chunks, "/ws/big").unwrap_err();
    assert!(e.starts_with("Patch too costly to apply"), "{e}");
}

/// Found by the hostile review: hunks were applied in the order listed, so a hunk of only
/// added lines (it goes at the end) listed before a removal panicked the tool or put the
/// line in the middle. They apply in the file's order now; a blank line before
/// `*** End Patch` or between files is spacing, not a context line the file must have.
#[test]
fn hunks_apply_in_the_files_order_and_blank_spacing_is_no_context() {
    let ops = parse(&patch("*** Update File: p\n@@\n+appended\n@@\n-b\n+B\n")).unwrap();
    let FileOp::Update { chunks, .. } = &ops[0] else {
        panic!()
    };
    assert_eq!(
        apply_chunks("a\nb\nc\n", chunks, "/ws/p").unwrap(),
        "a\nB\nc\nappended\n"
    );
    let ops = parse(&patch(
        "*** Update File: p\n@@\n one\n-two\n+TWO\n\n*** Update File: q\n@@\n-x\n+y\n",
    ))
    .unwrap();
    let FileOp::Update { chunks, .. } = &ops[0] else {
        panic!()
    };
    assert_eq!(chunks[0].old, ["one", "two"]);
    assert_eq!(
        apply_chunks("one\ntwo\n", chunks, "/ws/p").unwrap(),
        "one\nTWO\n"
    );
}
