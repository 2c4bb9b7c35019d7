use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError {
        file: "t.toml".into(),
        line: None,
        problem: ConfigProblem::Syntax(e.to_string()),
    })?;
    Config::from_raw(
        raw,
        Path::new("t.toml"),
        Path::new("/state"),
        &Overrides::default(),
    )
}

/// The shipped example is a valid config, and every hook in it is a real event.
#[test]
fn the_deploy_example_loads() {
    let text = include_str!("../../../deploy/loopgate.toml.example");
    let c = load(text).unwrap();
    assert_eq!(c.agents.len(), 2);
    assert_eq!(c.agents[0].providers[0].context_window, Some(128_000));
    // With its commented-out hooks switched on, it still loads.
    let hooks = text
        .replace("# [[hooks.", "[[hooks.")
        .replace("# command", "command")
        .replace("# priority", "priority")
        .replace("# timeout_seconds = 5", "timeout_seconds = 5");
    let c = load(&hooks).unwrap();
    assert_eq!(c.gateway_hooks.len(), 1);
    assert_eq!(c.agents[0].hooks.len(), 1);
}

#[test]
fn the_queue_policy_defaults_to_openclaws_and_is_checked_r_b3() {
    use ipc::queue::{QueueDrop, QueueMode, QueuePolicy};
    assert_eq!(load("").unwrap().queue, QueuePolicy::default());
    let c =
        load("[messages.queue]\nmode = \"collect\"\ndebounce_ms = 50\ncap = 3\ndrop = \"new\"\n")
            .unwrap();
    assert_eq!(
        c.queue,
        QueuePolicy {
            mode: QueueMode::Collect,
            debounce_ms: 50,
            cap: 3,
            drop: QueueDrop::New
        }
    );
    for (bad, why) in [
        ("mode = \"later\"", "messages.queue.mode"),
        ("drop = \"all\"", "messages.queue.drop"),
        ("cap = 0", "messages.queue.cap"),
        ("debounce_ms = 600000", "messages.queue.debounce_ms"),
    ] {
        let e = load(&format!("[messages.queue]\n{bad}\n")).unwrap_err();
        assert!(e.problem.to_string().contains(why), "{bad}: {e:?}");
    }
}

#[test]
fn fallbacks_models_and_thinking_defaults_are_read_and_checked_r_b5_r_d5() {
    let providers =
        "[models.providers.a]\napi = \"openai-responses\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
             [models.providers.a.models.think]\nreasoning = true\ncontext_window = 4096\n\
             [models.providers.b]\napi = \"ollama\"\nbase_url = \"http://127.0.0.1:2\"\n";
    let c = load(&format!(
        "[agents.defaults]\nmodel = {{ primary = \"a/think\", fallbacks = [\"b/small\"] }}\n\
             thinking_default = \"x-high\"\nreasoning_default = \"stream\"\n{providers}"
    ))
    .unwrap();
    let a = &c.agents[0];
    let m = a.model.as_ref().unwrap();
    assert!(m.reasoning);
    assert_eq!(m.context_window, Some(4096), "the model's own window");
    assert_eq!(a.fallbacks.len(), 1);
    assert_eq!(
        (
            a.fallbacks[0].provider.as_str(),
            a.fallbacks[0].model.as_str()
        ),
        ("b", "small")
    );
    assert_eq!(a.thinking_default, Some(ipc::thinking::Thinking::XHigh));
    assert_eq!(a.reasoning_default, ipc::thinking::ReasoningMode::Stream);
    // A level on a model that cannot think, an unknown level, an unknown fallback.
    for (model, extra, needle) in [
        (
            "\"b/small\"",
            "thinking_default = \"high\"\n",
            "needs a reasoning model",
        ),
        (
            "\"a/think\"",
            "thinking_default = \"loud\"\n",
            "not a thinking level",
        ),
        (
            "{ primary = \"a/think\", fallbacks = [\"c/x\"] }",
            "",
            "fallbacks[0]",
        ),
        ("{ primary = \"a/think\", other = 1 }", "", "primary"),
    ] {
        let e = load(&format!(
            "[agents.defaults]\nmodel = {model}\n{extra}{providers}"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains(needle), "{model} {extra}: {e}");
    }
}

#[test]
fn compaction_and_context_window_are_checked() {
    let base = "[models.providers.x]\napi = \"openai-completions\"\nbase_url = \"http://127.0.0.1:1/v1\"\n";
    let e = load(&format!("{base}context_window = 10\n")).unwrap_err();
    assert!(
        e.problem
            .to_string()
            .contains("models.providers.x.context_window"),
        "{e}"
    );
    let e = load("[agents.defaults.compaction]\nreserve_tokens = 0\n").unwrap_err();
    assert!(
        e.problem.to_string().contains("agents.defaults.compaction"),
        "{e}"
    );
    let c = load(&format!(
            "[agents.defaults]\nmodel = \"x/m\"\n[agents.defaults.compaction]\nkeep_recent_tokens = 500\n\n{base}"
        ))
        .unwrap();
    assert_eq!(c.agents[0].compaction.keep_recent_tokens, Some(500));
    assert_eq!(c.agents[0].compaction.reserve_tokens, None);
}

#[test]
fn ids_are_lowercase_and_the_crash_loop_breaker_needs_a_crash() {
    let e = load("[agents.list.Ops]\nname = \"x\"\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(e.contains("lowercase"), "{e}");
    let e = load("[workers]\ncrash_loop_max = 0\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(e.contains("crash_loop_max"), "{e}");
}

#[test]
fn defaults_without_a_file() {
    let c = load("").unwrap();
    assert_eq!(c.gateway.port, DEFAULT_PORT);
    assert_eq!(c.agents.len(), 1);
    assert_eq!(c.agents[0].id.as_str(), "main");
    assert_eq!(c.agents[0].timeout_ms, Some(DEFAULT_TIMEOUT_SECONDS * 1000));
    assert_eq!(
        c.agents[0].workspace,
        Path::new("/state/agents/main/workspace")
    );
    assert!(c.agents[0].model.is_none());
}

#[test]
fn full_config_resolves() {
    let c = load(
        r#"
            [gateway]
            port = 0
            bind = "loopback"
            [gateway.auth]
            token = "s3cret"
            [agents.defaults]
            model = "local/m1"
            timeout_seconds = 0
            [agents.list.ops]
            workspace = "/w/ops"
            [models.providers.local]
            api = "openai-completions"
            base_url = "http://127.0.0.1:8080/v1/"
            api_key_env = "LOCAL_KEY"
            "#,
    )
    .unwrap();
    assert_eq!(c.gateway.port, 0);
    assert_eq!(c.gateway.auth_mode, AuthMode::Token);
    assert_eq!(c.agents.len(), 2);
    let ops = c.agent("ops").unwrap();
    assert_eq!(ops.timeout_ms, None);
    let m = ops.model.as_ref().unwrap();
    assert_eq!(m.base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(m.idle_timeout_ms, 300_000);
    assert!(!format!("{c:?}").contains("s3cret"));
}

#[test]
fn errors_name_the_key_or_line() {
    let e = load("[gateway]\nprot = 1\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(e.contains("line 2") && e.contains("prot"), "{e}");
    let e = load("[agents.defaults]\nmodel = \"nope\"\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(
        e.contains("line 2") && e.contains("<provider>/<model>"),
        "{e}"
    );
    let e = load("[agents.defaults]\nmodel = \"x/y\"\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(
        e.contains("agents.defaults.model") && e.contains("\"x\""),
        "{e}"
    );
    let e = load("[agents.list.\"Bad Id\"]\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(e.contains("invalid agent id"), "{e}");
    let e = load("[gateway]\nport = 70000\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(e.contains("line 2"), "{e}");
    let e = load("[gateway.auth]\nmode = \"token\"\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(e.contains("gateway.auth.mode"), "{e}");
    // Names the link's enums do not know are refused by key, not passed on as Unknown.
    let e = load("[agents.defaults.tools.exec]\nsecurity = \"approve\"\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(
        e.contains("agents.defaults.tools.exec.security") && e.contains("allowlist"),
        "{e}"
    );
    let e = load("[agents.list.ops.tools.exec]\nsecurity = \"sudo\"\n")
        .unwrap_err()
        .problem
        .to_string();
    assert!(e.contains("agents.list.ops.tools.exec.security"), "{e}");
    let e =
        load("[models.providers.x]\napi = \"gemini-live\"\nbase_url = \"http://127.0.0.1:1\"\n")
            .unwrap_err()
            .problem
            .to_string();
    assert!(
        e.contains("models.providers.x.api") && e.contains("openai-completions"),
        "{e}"
    );
}

#[test]
fn self_hosted_detection() {
    assert!(is_self_hosted("http://127.0.0.1:8080/v1"));
    assert!(is_self_hosted("http://localhost:11434"));
    assert!(is_self_hosted("http://192.168.1.2/v1"));
    assert!(!is_self_hosted("https://api.openai.com/v1"));
}

/// No `[cluster]`: today's single-host gateway. A usable section is validated with its
/// defaults; one the gateway cannot use is refused naming the key (issue 25).
#[test]
fn the_cluster_section_is_opt_in_and_checked() {
    assert_eq!(load("").unwrap().cluster, None);
    let c = load(
        "[cluster]\nnats = [\"nats://127.0.0.1:4222\", \"nats://127.0.0.1:4223\"]\nnode = \"h1\"\n",
    )
    .unwrap();
    let s = c.cluster.unwrap();
    assert_eq!(s.node, "h1");
    assert_eq!(s.lease_ttl, std::time::Duration::from_secs(5));
    for (text, key) in [
        ("[cluster]\nnats = []\nnode = \"h1\"\n", "cluster.nats"),
        (
            "[cluster]\nnats = [\"nats://x:1\"]\nnode = \"a.b\"\n",
            "cluster.node",
        ),
        (
            "[cluster]\nnats = [\"nats://x:1\"]\nnode = \"h1\"\nlease_ttl_seconds = 0\n",
            "cluster.lease_ttl_seconds",
        ),
    ] {
        let e = load(text).unwrap_err();
        assert_eq!(e.key(), Some(key), "{e}");
    }
    // The shipped example's cluster section, switched on, loads.
    let example = include_str!("../../../deploy/loopgate.toml.example");
    let on = [
        "[cluster]",
        "nats =",
        "node =",
        "lease_ttl_seconds =",
        "replicas =",
    ]
    .iter()
    .fold(example.to_owned(), |t, k| t.replace(&format!("# {k}"), k));
    assert_eq!(load(&on).unwrap().cluster.unwrap().replicas, 3);
    // Its scheduler and web_fetch sections, switched on, load.
    let start = example.find("# [cron]").unwrap();
    let end = example.find("# Stuck-session").unwrap();
    let block: String = example[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.starts_with('[') || l.contains(" = "))
        .collect::<Vec<_>>()
        .join("\n");
    let on = format!("{}\n{block}\n", &example[..start]);
    let c = load(&on).unwrap();
    assert_eq!((c.cron.enabled, c.cron.skip_missed), (true, false));
    let wf = &c.agents[0].web_fetch;
    assert_eq!(
        (
            wf.allowed_hostnames.clone(),
            wf.timeout_ms,
            wf.max_redirects
        ),
        (vec!["intranet.example".to_owned()], 30_000, 3)
    );
    for (text, key) in [
        (
            "[agents.defaults.tools.web_fetch]\nmax_redirects = 11\n",
            "agents.defaults.tools.web_fetch.max_redirects",
        ),
        (
            "[agents.defaults.tools.web_fetch]\ntimeout_seconds = 0\n",
            "agents.defaults.tools.web_fetch.timeout_seconds",
        ),
        (
            "[agents.defaults.tools.web_fetch]\nmax_response_bytes = 10\n",
            "agents.defaults.tools.web_fetch.max_response_bytes",
        ),
        (
            "[agents.defaults.tools.web_fetch]\nallowed_hostnames = [\"http://x\"]\n",
            "agents.defaults.tools.web_fetch.allowed_hostnames",
        ),
    ] {
        assert_eq!(load(text).unwrap_err().key(), Some(key), "{text}");
    }
    let e = load("[cluster]\nnats = [\"nats://x:1\"]\nnode = \"h1\"\nleader = true\n").unwrap_err();
    assert!(e.problem.to_string().contains("leader"), "{e}");
}

/// A file the parser refuses is reported by line and column, never by quoting its lines:
/// the message is logged (and `logs.tail` gives the log to readers), and the broken line
/// may hold the gateway token (review of d6c4e0d).
#[test]
fn a_syntax_error_quotes_no_line_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loopgate.toml");
    std::fs::write(&path, "[gateway.auth]\ntoken = \"SECRET-IN-LINE\" x\n").unwrap();
    let err = Config::load(&path, dir.path(), &Overrides::default(), true).unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("SECRET-IN-LINE"), "{text}");
    assert!(text.contains("line 2"), "{text}");
}
