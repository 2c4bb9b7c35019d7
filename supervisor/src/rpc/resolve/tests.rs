//! `sessions.resolve`'s decisions: one name at a time, and what a label or a short id
//! finds.

use super::super::tests::index_row;
use super::*;

const UUID: &str = "6C678EE7-1a2b-4c3d-8e9f-001122334455";

#[test]
fn short_ids_are_the_keys_uuid_without_dashes() {
    assert_eq!(
        short_id_of(&format!("agent:main:{UUID}")),
        "6c678ee71a2b4c3d8e9f001122334455"
    );
    assert_eq!(short_id_of("plain"), "plain");
}

/// R-A1: a session is named one way at a time.
#[test]
fn a_session_is_named_exactly_one_way() {
    let p = |f: fn(&mut SessionsResolveParams)| {
        let mut p = SessionsResolveParams::default();
        f(&mut p);
        resolve_refusal(&p)
    };
    assert_eq!(p(|_| {}), Some(ResolveRefused::NoneGiven));
    assert_eq!(
        p(|p| {
            p.key = Some("k".into());
            p.label = Some("l".into());
        }),
        Some(ResolveRefused::Several)
    );
    assert_eq!(
        p(|p| {
            p.label = Some("l".into());
            p.slug_hint = Some("my-chat".into());
        }),
        Some(ResolveRefused::SlugHintAlone)
    );
    assert_eq!(
        p(|p| {
            p.short_id = Some("6c678ee7".into());
            p.slug_hint = Some("my-chat".into());
        }),
        None
    );
    assert_eq!(
        ResolveRefused::Several.to_string(),
        "Provide either key, sessionId, label, shortId, or reference (not multiple)"
    );
}

fn labelled(key: &str, label: &str) -> crate::gatewaydb::SessionRow {
    crate::gatewaydb::SessionRow {
        label: Some(label.into()),
        ..index_row(key)
    }
}

#[test]
fn a_label_finds_its_one_session_and_names_several() {
    let rows = || {
        vec![
            labelled("agent:main:a", "Plans"),
            labelled("agent:main:b", "Work"),
            labelled("agent:main:c", "Work"),
        ]
    };
    assert_eq!(
        by_label(rows(), " Plans ").unwrap(),
        Found::One(ResolvedSession {
            key: "agent:main:a".into(),
            agent_id: "main".into(),
            display_name: Some("Plans".into()),
        })
    );
    assert_eq!(
        by_label(rows(), "Home").unwrap(),
        Found::None("No session found with label: Home".into())
    );
    let e = by_label(rows(), "Work").unwrap_err();
    assert_eq!(
        e.message,
        "Multiple sessions found with label: Work (agent:main:b, agent:main:c)"
    );
}

/// R-A1: the Control UI's `/chat/<agent>/<shortId>` resolves by the start of the key's
/// UUID, in any case; an ambiguous one lists at most 10 candidates.
#[test]
fn a_short_id_finds_the_sessions_whose_uuid_starts_with_it() {
    let one = vec![
        index_row(&format!("agent:main:{UUID}")),
        index_row("agent:main:11111111-0000-0000-0000-000000000000"),
    ];
    let Found::One(s) = by_short_id(one, "6C678EE71A2B").unwrap() else {
        panic!("one session has that short id");
    };
    assert_eq!(s.key, format!("agent:main:{UUID}"));

    let many: Vec<_> = (0..12)
        .map(|i| {
            index_row(&format!(
                "agent:main:abcdef01-0000-0000-0000-0000000000{i:02}"
            ))
        })
        .collect();
    let Found::Several(c) = by_short_id(many.clone(), "abcdef01").unwrap() else {
        panic!("twelve sessions share that short id");
    };
    assert_eq!(c.len(), 10);
    assert_eq!(
        by_short_id(many, "abcdef02").unwrap(),
        Found::None("No session found: abcdef02".into())
    );
    for bad in ["abc", "6c678ee7-1a2b", &"a".repeat(33)] {
        let e = by_short_id(Vec::new(), bad).unwrap_err();
        assert_eq!(e.message, "shortId must be 8-32 hexadecimal characters");
    }
}

#[test]
fn nothing_found_is_an_error_unless_missing_is_allowed() {
    let e = answer_of(Found::None("No session found: k".into()), false).unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.message.as_str()),
        (ipc::gateway::codes::INVALID_REQUEST, "No session found: k")
    );
    let r = answer_of(Found::None("No session found: k".into()), true).unwrap();
    assert!(!r.ok && r.found.is_none() && r.candidates.is_none());
    let r = answer_of(Found::Several(Vec::new()), false).unwrap();
    assert_eq!((r.ok, r.candidates), (false, Some(Vec::new())));
}
