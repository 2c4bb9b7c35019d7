use super::*;

/// A refused turn between two admitted ones does not let the third overtake the first.
#[tokio::test]
async fn a_refused_turn_keeps_the_order_of_its_neighbours() {
    let (a, next) = AdmissionTurn::after(None);
    let (b, next) = AdmissionTurn::after(Some(next));
    let (mut c, _next) = AdmissionTurn::after(Some(next));
    drop(b); // refused before waiting for `a`
    let waiting = tokio::spawn(async move {
        c.wait_previous().await;
    });
    tokio::task::yield_now().await;
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished(), "c went before a was admitted");
    drop(a);
    waiting.await.unwrap();
}

fn p(agent: Option<&str>, key: Option<&str>) -> AgentParams {
    AgentParams {
        message: "m".into(),
        idempotency_key: "k".into(),
        agent_id: agent.map(Into::into),
        session_key: key.map(Into::into),
        ..Default::default()
    }
}

fn configured(id: &str) -> bool {
    id == "main" || id == "ops"
}

#[test]
fn routing_follows_r_a1_precedence() {
    let r = |a, k| route(&p(a, k), configured);
    assert_eq!(r(None, None).unwrap().session_key, "agent:main:main");
    assert_eq!(r(Some("ops"), None).unwrap().session_key, "agent:ops:main");
    assert_eq!(r(Some("OPS"), None).unwrap().agent_id, "ops");
    assert_eq!(
        r(None, Some("incident-42")).unwrap().session_key,
        "agent:main:incident-42"
    );
    assert_eq!(
        r(Some("ops"), Some("x")).unwrap().session_key,
        "agent:ops:x"
    );
    let k = r(None, Some("agent:ops:thread")).unwrap();
    assert_eq!(
        (k.agent_id.as_str(), k.session_key.as_str()),
        ("ops", "agent:ops:thread")
    );
    let unknown = RouteError::UnknownAgent("ghost".into());
    assert_eq!(r(Some("ghost"), None), Err(unknown.clone()));
    assert_eq!(r(None, Some("agent:ghost:x")), Err(unknown));
    assert_eq!(
        r(Some("main"), Some("agent:ops:x")),
        Err(RouteError::KeyOfAnotherAgent {
            key: "agent:ops:x".into(),
            owner: "ops".into(),
            asked: "main".into()
        })
    );
    for bad in ["agent:ops", "agent:ops:", ""] {
        assert!(
            matches!(
                r(None, Some(bad)),
                Err(RouteError::KeyShape(_) | RouteError::KeyLength)
            ),
            "{bad:?}"
        );
    }
}

/// Issue 23 (last Deliver bullet): keys that could hide or fake what an operator reads are
/// refused at routing, the one check every method with a client-chosen key passes.
#[test]
fn keys_with_controls_or_bidi_marks_are_refused() {
    for bad in [
        "a\u{1b}[2Jb",
        "a\u{1b}]0;t\u{7}",
        "x\u{7f}",
        "x\u{9b}31m",
        "x\u{200E}",
        "x\u{202E}y",
        "x\u{2066}y",
        "x\ny",
        "agent:main:x\u{0}",
    ] {
        let e = route(&p(None, Some(bad)), configured).unwrap_err();
        assert!(matches!(e, RouteError::KeyUnshowable(_)), "{bad:?}: {e}");
        assert!(e.to_string().contains("control or bidirectional"), "{e}");
    }
    assert!(route(&p(None, Some("é-日本-ok")), configured).is_ok());
}

#[test]
fn a_session_id_routes_only_without_a_key_r_a1() {
    let with = |key: Option<&str>, to: Option<&str>| AgentParams {
        session_id: Some("0190-abc".into()),
        session_key: key.map(Into::into),
        to: to.map(Into::into),
        ..p(None, None)
    };
    assert_eq!(session_id_only(&with(None, None)), Some("0190-abc"));
    assert_eq!(
        session_id_only(&with(None, Some("+15551234"))),
        Some("0190-abc")
    );
    assert_eq!(session_id_only(&with(Some("k"), None)), None);
    assert_eq!(session_id_only(&with(None, Some("agent:ops:x"))), None);
    assert_eq!(session_id_only(&p(None, Some("k"))), None);
    // Unresolved, `route` refuses it rather than picking a session.
    assert_eq!(
        route(&with(None, None), configured),
        Err(RouteError::IdUnresolved)
    );
}
