use super::*;
use ipc::control::{RunStopReason, Usage};
use ipc::footer::{ModelPrice, UsageFooter};

fn terminal(usage: Option<Usage>, payloads: &[&str]) -> RunTerminal {
    RunTerminal {
        status: RunStatus::Ok,
        stop_reason: Some(RunStopReason::Stop),
        provider: Some("p".into()),
        model: Some("m".into()),
        usage,
        tool_calls: 2,
        payloads: payloads
            .iter()
            .map(|t| Payload {
                text: (*t).into(),
                is_error: false,
            })
            .collect(),
        ..RunTerminal::without_work("r", RunStatus::Ok, 1, String::new(), None)
    }
}

fn usage() -> Usage {
    Usage {
        input: 1234,
        output: 38,
        cache_read: 0,
        cache_write: 0,
        total: 1272,
    }
}

/// `/usage full`: the footer closes the reply's last text, on a line of its own, with the
/// estimate at the answering model's price; the chat `final` shows the same line.
#[test]
fn the_usage_footer_ends_the_last_text() {
    let spec = NotesSpec {
        usage_footer: Some(UsageFooter {
            cost: true,
            prices: vec![ModelPrice {
                provider: "p".into(),
                model: "m".into(),
                input: 3.0,
                output: 15.0,
                cache_read: 0.0,
                cache_write: 0.0,
            }],
        }),
        raw_trace: None,
    };
    let mut t = terminal(Some(usage()), &["first", "the answer"]);
    let notes = Notes::of(&spec, &t, "the answer");
    // 1234 x $3/M + 38 x $15/M = $0.004272.
    let line = "Usage: 1.2k in / 38 out · est $0.0043";
    assert_eq!(notes.usage_line.as_deref(), Some(line));
    assert_eq!(notes.chat_text(), Some(format!("\n{line}")));
    notes.apply(&mut t.payloads);
    let texts: Vec<&str> = t.payloads.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(texts, ["first", &format!("the answer\n{line}")]);

    // A run that failed, or used no tokens, has none.
    t.status = RunStatus::Error;
    assert_eq!(Notes::of(&spec, &t, ""), Notes::default());
    let silent = terminal(None, &[]);
    assert_eq!(Notes::of(&spec, &silent, "").usage_line, None);
}

/// `/trace raw`: OpenClaw's blocks after the reply, its message and raw output fenced so
/// neither can close the fence.
#[test]
fn the_raw_trace_reads_as_openclaws() {
    let spec = NotesSpec {
        usage_footer: None,
        raw_trace: Some(RawTraceSpec {
            message: "hi\n~~~\nnot code".into(),
            thinking: Some("low".into()),
            reasoning: ipc::thinking::ReasoningMode::Off,
            verbose: ipc::thinking::VerboseLevel::Off,
            blocks: None,
        }),
    };
    let mut t = terminal(Some(usage()), &["the answer"]);
    let notes = Notes::of(&spec, &t, "the answer");
    let trace = notes.trace.clone().expect("a trace");
    assert!(trace.starts_with(
        "🔎 Usage (Last Turn Total):\n~~~text\ninput=1,234 tok (1.2k)\noutput=38 tok (38)\n"
    ));
    assert!(trace.contains("🔎 Execution Result:\n~~~text\nwinner=p/m\nfallbackUsed=no\n~~~"));
    assert!(trace.contains(
        "🔎 Request Shaping:\n~~~text\nprovider=p\nmodel=m\nthinking=low\nreasoning=off\nverbose=off\ntrace=raw\n~~~"
    ));
    assert!(trace.contains("🔎 Tool Summary:\n~~~text\ncalls=2\n~~~"));
    assert!(trace.contains("🔎 Model Input (User Role):\n~~~text\nhi\n\\~~~\nnot code\n~~~"));
    assert!(trace.contains("🔎 Model Output (Assistant Role):\n~~~text\nthe answer\n~~~"));
    assert!(trace.ends_with(
        "Summary: winner=p/m 🧠 low fallback=no stop=stop ⬇️ 1.2k ⬆️ 38 🔢 1.3k tools=2"
    ));
    assert_eq!(trace.matches("\n\n\n").count(), 7, "blocks apart: {trace}");
    notes.apply(&mut t.payloads);
    assert_eq!(t.payloads.len(), 2);
    assert_eq!(t.payloads[1].text, trace);
    assert_eq!(notes.chat_text(), Some(format!("\n\n{trace}")));
}

/// The footer's words: tokens alone, the estimate at the answering model's price, cache
/// tokens, no estimate for a model without a price, nothing for a run without tokens.
#[test]
fn the_footer_reads_as_openclaws() {
    let price = ModelPrice {
        provider: "p".into(),
        model: "m".into(),
        input: 1.0,
        output: 2.0,
        cache_read: 0.5,
        cache_write: 0.0,
    };
    let tokens_only = UsageFooter {
        cost: false,
        prices: vec![price.clone()],
    };
    let full = UsageFooter {
        cost: true,
        prices: vec![price],
    };
    let u = Usage {
        input: 1200,
        output: 38,
        cache_read: 0,
        cache_write: 0,
        total: 1238,
    };
    assert_eq!(
        usage_line(&tokens_only, &u, "p", "m").as_deref(),
        Some("Usage: 1.2k in / 38 out")
    );
    // 1200 x $1/M + 38 x $2/M = $0.001276.
    assert_eq!(
        usage_line(&full, &u, "p", "m").as_deref(),
        Some("Usage: 1.2k in / 38 out · est $0.0013")
    );
    // Input counts every prompt token; the cached ones are shown and priced apart.
    let cached = Usage {
        input: 1000,
        output: 10,
        cache_read: 900,
        cache_write: 0,
        total: 1010,
    };
    assert_eq!(
        usage_line(&full, &cached, "p", "other").as_deref(),
        Some("Usage: 100 in / 10 out · cache 900 cached / 0 new")
    );
    // 100 x $1/M + 10 x $2/M + 900 x $0.5/M = $0.00057.
    assert_eq!(
        usage_line(&full, &cached, "p", "m").as_deref(),
        Some("Usage: 100 in / 10 out · cache 900 cached / 0 new · est $0.0006")
    );
    assert_eq!(usage_line(&full, &Usage::default(), "p", "m"), None);
}

/// Both notes, in OpenClaw's order: the trace is a payload of its own, then the usage line
/// ends the last text (the trace's); the chat shows the trace, then the line.
#[test]
fn the_trace_comes_before_the_usage_line() {
    let spec = NotesSpec {
        usage_footer: Some(UsageFooter {
            cost: false,
            prices: vec![],
        }),
        raw_trace: Some(RawTraceSpec {
            message: "q".into(),
            thinking: None,
            reasoning: ipc::thinking::ReasoningMode::Off,
            verbose: ipc::thinking::VerboseLevel::Off,
            blocks: None,
        }),
    };
    let mut t = terminal(Some(usage()), &["answer"]);
    let notes = Notes::of(&spec, &t, "answer");
    let (trace, line) = (
        notes.trace.clone().unwrap(),
        notes.usage_line.clone().unwrap(),
    );
    notes.apply(&mut t.payloads);
    let texts: Vec<&str> = t.payloads.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(texts, ["answer", &format!("{trace}\n{line}")]);
    assert_eq!(notes.chat_text(), Some(format!("\n\n{trace}\n{line}")));
}

/// Found by the hostile review: a bare `\r` is a line break to a Markdown reader, and a
/// fence closes after up to three spaces, so the model's output could close the trace's
/// fence and forge blocks. Every such line is escaped now.
#[test]
fn nothing_the_model_writes_closes_the_fence() {
    let shown = raw_block(
        "Model Output (Assistant Role)",
        "ok\r~~~\r\n  ~~~text\n    ~~~ code",
    );
    assert_eq!(
        shown,
        "🔎 Model Output (Assistant Role):\n~~~text\nok\n\\~~~\n  \\~~~text\n    ~~~ code\n~~~"
    );
}
