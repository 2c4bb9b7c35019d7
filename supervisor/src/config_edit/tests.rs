use super::*;

const FILE: &str = r#"# The operator's own words.
[gateway]
port = 18789 # the port clients use
[gateway.auth]
token = "s3cret-token"

[agents.defaults]
model = "p/m"   # keep this comment
timeout_seconds = 600

[agents.list.ops]
name = "Ops"

[models.providers.p]
api = "openai-completions"
base_url = "http://user:pw@127.0.0.1:9/v1"
"#;

fn doc() -> DocumentMut {
    document(FILE).unwrap()
}

/// RFC 4231, test case 2 (key "Jefe", zero-padded as HMAC pads every short key).
#[test]
fn the_content_hash_is_a_standard_hmac() {
    let mut key = [0u8; 32];
    key[..4].copy_from_slice(b"Jefe");
    let mac = crate::secrets::hex(&crate::secrets::hmac_sha256(
        &key,
        b"what do ya want for nothing?",
    ));
    assert_eq!(
        mac,
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    assert!(content_hash(b"x").starts_with("hmac-sha256:"));
    assert_ne!(content_hash(b"x"), content_hash(b"y"));
}

#[test]
fn config_get_shows_no_secret_and_keeps_the_operators_text() {
    let (text, parsed) = redacted(&doc());
    assert!(!text.contains("s3cret-token") && !text.contains("user:pw"));
    assert!(text.contains("# The operator's own words.") && text.contains("# keep this comment"));
    assert_eq!(parsed["gateway"]["auth"]["token"], REDACTED);
    assert_eq!(parsed["models"]["providers"]["p"]["base_url"], REDACTED);
    assert_eq!(parsed["agents"]["defaults"]["timeout_seconds"], 600);
    // The same bytes, the same hash; another byte, another.
    assert_eq!(content_hash(FILE.as_bytes()), content_hash(FILE.as_bytes()));
    assert_ne!(content_hash(FILE.as_bytes()), content_hash(text.as_bytes()));
}

#[test]
fn a_merge_patch_changes_only_its_keys_and_keeps_comments_and_order() {
    let mut d = doc();
    let patch = parse_patch(
        "{agents: {defaults: {timeout_seconds: 900}, list: {ops: null, qa: {name: 'QA', model: 'p/m'}}}, gateway: {max_connections: 64, port: 18790}}",
    )
    .unwrap();
    merge(&mut d, &patch).unwrap();
    let text = d.to_string();
    assert!(text.contains("timeout_seconds = 900"), "{text}");
    assert!(
        text.contains("model = \"p/m\"   # keep this comment"),
        "{text}"
    );
    assert!(
        text.contains("port = 18790 # the port clients use"),
        "{text}"
    );
    assert!(!text.contains("[agents.list.ops]"), "{text}");
    assert!(text.contains("[agents.list.qa]"), "{text}");
    assert!(
        text.find("[gateway]") < text.find("[agents.defaults]"),
        "order kept: {text}"
    );
    let changed = changed_paths(&as_json(&doc()), &as_json(&d));
    assert_eq!(
        changed,
        [
            "agents.defaults.timeout_seconds",
            "agents.list.ops",
            "agents.list.qa",
            "gateway.max_connections",
            "gateway.port"
        ]
    );
    // Again: nothing changes.
    let before = d.to_string();
    merge(&mut d, &patch).unwrap();
    assert_eq!(d.to_string(), before);
}

#[test]
fn arrays_replace_and_arrays_of_objects_become_tables() {
    let mut d = doc();
    let patch = parse_patch(
        r#"{agents: {defaults: {fallbacks: ["a/b", "c/d"]}}, hooks: {before_tool_call: [{command: ["x"], timeout_seconds: 2}]}}"#,
    )
    .unwrap();
    merge(&mut d, &patch).unwrap();
    let text = d.to_string();
    assert!(text.contains(r#"fallbacks = ["a/b", "c/d"]"#), "{text}");
    assert!(text.contains("[[hooks.before_tool_call]]"), "{text}");
    let v = as_json(&d);
    assert_eq!(v["hooks"]["before_tool_call"][0]["timeout_seconds"], 2);
}

#[test]
fn a_redacted_value_sent_back_keeps_the_files_secret() {
    let (text, _) = redacted(&doc());
    let mut sent =
        document(&text.replace("timeout_seconds = 600", "timeout_seconds = 700")).unwrap();
    restore_secrets(&mut sent, &doc()).unwrap();
    let v = as_json(&sent);
    assert_eq!(v["gateway"]["auth"]["token"], "s3cret-token");
    assert_eq!(
        v["models"]["providers"]["p"]["base_url"],
        "http://user:pw@127.0.0.1:9/v1"
    );
    assert_eq!(v["agents"]["defaults"]["timeout_seconds"], 700);
    // The placeholder where the file has nothing is refused, naming the place.
    let mut new = doc();
    merge(
        &mut new,
        &parse_patch(&format!("{{cluster: {{node: '{REDACTED}'}}}}")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        restore_secrets(&mut new, &doc()),
        Err(EditError::NothingToRestore("cluster.node".into()))
    );
}

#[test]
fn a_patch_that_is_not_a_json5_object_is_refused_as_openclaw_says() {
    assert!(matches!(parse_patch("{agents:"), Err(EditError::Json5(_))));
    assert!(parse_patch("{agents:")
        .unwrap_err()
        .to_string()
        .starts_with("SyntaxError: JSON5: "));
    assert_eq!(parse_patch("[1]"), Err(EditError::NotAnObject));
    assert_eq!(
        EditError::NotAnObject.to_string(),
        "config.patch raw must be an object"
    );
    let mut d = doc();
    let err = merge(&mut d, &parse_patch("{a: [1, null]}").unwrap()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid config: a.1: null has no place in an array"
    );
}

#[test]
fn a_whole_file_that_drops_most_settings_is_destructive_however_padded() {
    let old = as_json(&doc());
    let padded = format!("[gateway]\nport = 0\n# {}\n", "x".repeat(2000));
    let new = as_json(&document(&padded).unwrap());
    assert_eq!(destructive(&old, &new), Some("settings-drop:7->1".into()));
    let mut most = doc();
    merge(&mut most, &parse_patch("{agents: {list: null}}").unwrap()).unwrap();
    assert_eq!(
        destructive(&old, &as_json(&most)),
        None,
        "one table of many"
    );
    let small = as_json(&document("[gateway]\nport = 1\n").unwrap());
    assert_eq!(
        destructive(&small, &as_json(&document("").unwrap())),
        None,
        "small files"
    );
}

/// Review of d6c4e0d: secrets in comments, in URLs without a password, in arrays and arrays
/// of inline tables, are redacted, and the redacted text applied back keeps them all.
#[test]
fn every_place_a_secret_can_sit_is_redacted_and_restored() {
    let text = r#"# token = "OLD-SECRET-2"
[gateway.auth]
token = "NOW-SECRET" # rotated from "OLD-SECRET-1"

[cluster]
nats = ["nats://u:NATSPW@n1:4222", "nats://n2:4222"]

[models.providers.p]
api = "openai-completions"
base_url = "https://ghp_TOKENONLY@host/v1"

[hooks]
gateway_start = [{ command = ["/bin/true", "https://u:HOOKPW@h/"] }]

[[hooks.before_tool_call]]
command = ["/bin/hook", "https://host/x?key=QUERYKEY"]
"#;
    let original = document(text).unwrap();
    let (raw, parsed) = redacted(&original);
    for secret in [
        "OLD-SECRET",
        "NOW-SECRET",
        "NATSPW",
        "TOKENONLY",
        "HOOKPW",
        "QUERYKEY",
    ] {
        assert!(!raw.contains(secret), "{secret} in {raw}");
        assert!(!parsed.to_string().contains(secret), "{secret} in {parsed}");
    }
    assert!(raw.contains("nats://n2:4222"), "not a secret: {raw}");
    let mut back = document(&raw).unwrap();
    restore_secrets(&mut back, &original).unwrap();
    let v = as_json(&back);
    assert_eq!(v["cluster"]["nats"][0], "nats://u:NATSPW@n1:4222");
    assert_eq!(
        v["hooks"]["gateway_start"][0]["command"][1],
        "https://u:HOOKPW@h/"
    );
    assert_eq!(
        v["hooks"]["before_tool_call"][0]["command"][1],
        "https://host/x?key=QUERYKEY"
    );
    assert_eq!(v["gateway"]["auth"]["token"], "NOW-SECRET");
}

#[test]
fn a_number_json_cannot_hold_is_refused_not_read_as_null() {
    for raw in [
        "{gateway: {auth: {token: NaN}}}",
        "{a: Infinity}",
        "{a: [-Infinity]}",
    ] {
        assert!(
            matches!(parse_patch(raw), Err(EditError::Json5(_))),
            "{raw}: {:?}",
            parse_patch(raw)
        );
    }
    assert!(parse_patch("{a: 1.5, b: [1, 'x', null], c: {d: true}}").is_ok());
}

#[test]
fn a_parsers_message_quotes_no_line_of_the_file() {
    let err = document("[gateway.auth]\ntoken = \"SECRET\" x\n").unwrap_err();
    let text = err.to_string();
    assert!(
        !text.contains("SECRET") && text.contains("line 2"),
        "{text}"
    );
}

/// The Control UI's form sends numbers as JavaScript prints them: `3` for the file's `3.0`
/// is no change, so the file keeps how it wrote it.
#[test]
fn a_whole_object_changes_only_what_differs() {
    let old = serde_json::json!({"cost": {"input": 3.0, "output": 15.0}, "a": [1.0, 2]});
    let whole = serde_json::json!({"cost": {"input": 3, "output": 16}, "a": [1, 2]});
    let serde_json::Value::Object(whole) = whole else {
        panic!()
    };
    let patch = replacing(&old, whole);
    assert_eq!(
        serde_json::Value::Object(patch),
        serde_json::json!({"cost": {"output": 16}})
    );
}

/// Removing a table's last key removes the table (no empty header left behind); a table
/// the operator wrote empty stays.
#[test]
fn a_table_emptied_by_a_patch_goes() {
    let mut doc = document("[a.tools]\nallow = [\"read\"]\n\n[b]\n").unwrap();
    let serde_json::Value::Object(patch) =
        serde_json::json!({"a": {"tools": {"allow": null}}, "b": {}})
    else {
        panic!()
    };
    merge(&mut doc, &patch).unwrap();
    let text = doc.to_string();
    assert!(!text.contains("[a.tools]"), "{text}");
    assert!(text.contains("[b]"), "{text}");
}

/// An agent is its key: removing its only setting keeps it (header and all); a table
/// inside it that the patch empties goes.
#[test]
fn an_agent_emptied_by_a_patch_stays() {
    let mut doc = document(
        "[agents.list.research]\nmodel = \"p/m\"\n\n[agents.list.qa.tools]\nallow = [\"read\"]\n",
    )
    .unwrap();
    let serde_json::Value::Object(patch) = serde_json::json!({"agents": {"list": {
        "research": {"model": null},
        "qa": {"tools": {"allow": null}}
    }}}) else {
        panic!()
    };
    merge(&mut doc, &patch).unwrap();
    let text = doc.to_string();
    let parsed = as_json(&document(&text).unwrap());
    assert!(parsed["agents"]["list"]["research"].is_object(), "{text}");
    assert!(parsed["agents"]["list"]["qa"].is_object(), "{text}");
    assert!(!text.contains("[agents.list.qa.tools]"), "{text}");
}

/// Saving the Control UI's form unchanged changes nothing: redacted secrets, floats sent as
/// integers, tables in arrays; an edited key keeps the comment lines above it.
#[test]
fn an_unchanged_form_is_no_change_and_an_edit_keeps_its_comments() {
    let text = "[gateway.auth]\n# rotated monthly\ntoken = \"s3cret\"\n\n[workers]\n# why 300\nidle_exit_seconds = 300\n\n[[hooks.before_tool_call]]\ncommand = [\"x\"]\ntimeout_seconds = 5.0\n\n[models.providers.p.models.m]\ncost = { input = 3.0 }  # USD\n";
    let doc = document(text).unwrap();
    let (_, shown) = redacted(&doc);
    let serde_json::Value::Object(mut form) =
        serde_json::from_str(&shown.to_string().replace("5.0", "5").replace("3.0", "3")).unwrap()
    else {
        panic!()
    };
    assert!(replacing(&as_json(&doc), form.clone()).is_empty());
    form["workers"]["idle_exit_seconds"] = serde_json::json!(400);
    let patch = replacing(&as_json(&doc), form);
    let mut new = doc.clone();
    merge(&mut new, &patch).unwrap();
    restore_secrets(&mut new, &doc).unwrap();
    let out = new.to_string();
    assert_eq!(
        out,
        text.replace("= 300", "= 400"),
        "only the edited value changed"
    );
}

/// The raw view saved back (the Control UI's raw editor, `config.apply`): a line the client
/// left as shown keeps the file's words, a redacted comment included; the edited line is
/// the client's; secret values come back by place.
#[test]
fn lines_left_as_shown_keep_the_files_words() {
    let original = "# old token tok-123 rotated\n[gateway.auth]\ntoken = \"s3cret\"\n\n[workers]\nidle_exit_seconds = 300\n";
    let doc = document(original).unwrap();
    let view = redacted(&doc).0;
    assert!(
        !view.contains("tok-123") && !view.contains("s3cret"),
        "{view}"
    );
    assert_eq!(view.lines().count(), original.lines().count(), "{view:?}");
    let sent = view.replace("= 300", "= 400");
    let back = restore_lines(&sent, &view, original);
    assert!(
        back.starts_with("# old token"),
        "{back:?} from {sent:?} / {view:?}"
    );
    let mut new = document(&back).unwrap();
    restore_secrets(&mut new, &doc).unwrap();
    assert_eq!(new.to_string(), original.replace("= 300", "= 400"));
    // A line the client did change is the client's, even where the view was redacted.
    let sent = view.replacen(&format!("# {REDACTED}"), "# rotated again", 1);
    let back = restore_lines(&sent, &view, original);
    assert!(back.starts_with("# rotated again\n"), "{back}");
    assert!(!back.contains("tok-123"), "{back}");
}

/// Found last session and left then: secrets in a list were restored by index, so removing
/// an element in a form paired the next one's placeholder with the removed one's secret (a
/// compromised server's URL the operator removed stayed in the file). In a list that changed
/// length a placeholder is restored only where the list held one secret; else the write is
/// refused.
#[test]
fn a_list_that_changed_never_pairs_a_placeholder_with_another_secret() {
    let text =
        "[cluster]\nnode = \"n1\"\nnats = [\"nats://u:old@h1:4222\", \"nats://u:new@h2:4222\"]\n";
    let doc = document(text).unwrap();
    let (view, _) = redacted(&doc);
    assert!(!view.contains("old") && !view.contains("new@"), "{view}");
    // Same length: each placeholder is its own element's.
    let mut same = document(&view).unwrap();
    restore_secrets(&mut same, &doc).unwrap();
    assert_eq!(same.to_string(), text);
    // One removed: which one is left cannot be told.
    let removed = format!("[cluster]\nnode = \"n1\"\nnats = [\"{REDACTED}\"]\n");
    let mut new = document(&removed).unwrap();
    assert_eq!(
        restore_secrets(&mut new, &doc),
        Err(EditError::AmbiguousSecret("cluster.nats.0".into()))
    );
    // A list that held one secret: it is that one, wherever it now stands.
    let one = document("[cluster]\nnode = \"n1\"\nnats = [\"nats://u:pw@h1:4222\"]\n").unwrap();
    let grown = format!("[cluster]\nnode = \"n1\"\nnats = [\"nats://h0:4222\", \"{REDACTED}\"]\n");
    let mut new = document(&grown).unwrap();
    restore_secrets(&mut new, &one).unwrap();
    assert!(
        new.to_string()
            .contains(r#"nats = ["nats://h0:4222", "nats://u:pw@h1:4222"]"#),
        "{new}"
    );
}
