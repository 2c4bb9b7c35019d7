//! Slash commands (issue 26 item 2): a chat message that is one command and nothing else
//! (`/new`, `/think high`, `/t:high`) is interpreted at admission instead of reaching the
//! model, as OpenClaw does for standalone commands. What each one does is in
//! `command_run.rs`; here are only the parsing, the catalog `commands.list` answers with,
//! and the reply texts (OpenClaw's wording where it was recorded).

use ipc::gateway::{CommandArg, CommandChoice, CommandEntry};

/// A command, parsed; its argument is checked when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Command {
    /// `/new [model]`: a fresh transcript (same session id), optionally on another model.
    New(Option<String>),
    /// `/reset [model]`: as `/new`.
    Reset(Option<String>),
    /// `/stop`: aborts the session's runs.
    Stop,
    Think(Option<String>),
    Model(Option<String>),
    Queue(Option<String>),
    /// `/compact [instructions]`.
    Compact(Option<String>),
    Reasoning(Option<String>),
    /// `/verbose [on|off|full]` (`/v`).
    Verbose(Option<String>),
    /// `/trace [on|off|raw]`: the session's trace level (admins only).
    Trace(Option<String>),
    Status,
    /// `/help`: the commands by group, in OpenClaw's layout.
    Help,
    /// `/commands`: every command with its aliases and description.
    Commands,
    /// `/usage [off|tokens|full|reset|cost]`: the session's usage footer, or the cost
    /// summary.
    Usage(Option<String>),
}

/// The longest command message interpreted (longer ones are text for the model).
const MAX_COMMAND_BYTES: usize = 4096;

/// The command `message` is, if it is one: a single line starting with `/` and a known name
/// or alias (any case), then its argument after a space or a `:`. Anything else (a path
/// like `/tmp/x`, an unknown name, a command followed by more lines) is a message.
pub(super) fn parse(message: &str) -> Option<Command> {
    let text = message.trim();
    if text.len() > MAX_COMMAND_BYTES || text.contains('\n') {
        return None;
    }
    let rest = text.strip_prefix('/')?;
    let name_end = rest
        .find(|c: char| c.is_whitespace() || c == ':')
        .unwrap_or(rest.len());
    let (name, tail) = rest.split_at(name_end);
    let arg = tail.strip_prefix(':').unwrap_or(tail).trim();
    let arg = (!arg.is_empty()).then(|| arg.to_owned());
    let name = name.to_ascii_lowercase();
    Some(match name.as_str() {
        "new" => Command::New(arg),
        "reset" => Command::Reset(arg),
        // Takes no argument: `/stop now` is text.
        "stop" if arg.is_none() => Command::Stop,
        "think" | "thinking" | "t" => Command::Think(arg),
        "model" => Command::Model(arg),
        "queue" => Command::Queue(arg),
        "compact" => Command::Compact(arg),
        "reasoning" | "reason" => Command::Reasoning(arg),
        "verbose" | "v" => Command::Verbose(arg),
        "trace" => Command::Trace(arg),
        "status" => Command::Status,
        "help" if arg.is_none() => Command::Help,
        "commands" if arg.is_none() => Command::Commands,
        "usage" => Command::Usage(arg),
        _ => return None,
    })
}

/// One argument of a command, as the catalog lists it (every one is a string).
struct ArgSpec {
    name: &'static str,
    description: &'static str,
    /// The values offered (none: free text).
    choices: &'static [&'static str],
    /// Whether the values depend on the session (the thinking levels its model takes).
    dynamic: bool,
    /// The value's JSON type as the catalog names it (`string`, `number`).
    kind: &'static str,
}

/// One command, as the catalog lists it.
struct Spec {
    name: &'static str,
    /// The names it is typed by, without the `/`.
    aliases: &'static [&'static str],
    description: &'static str,
    category: &'static str,
    accepts_args: bool,
    args: &'static [ArgSpec],
}

/// A free-text argument.
const fn text(name: &'static str, description: &'static str) -> ArgSpec {
    ArgSpec {
        name,
        description,
        choices: &[],
        dynamic: false,
        kind: "string",
    }
}

/// A numeric argument.
const fn number(name: &'static str, description: &'static str) -> ArgSpec {
    ArgSpec {
        kind: "number",
        ..text(name, description)
    }
}

/// An argument with a fixed set of values.
const fn one_of(
    name: &'static str,
    description: &'static str,
    choices: &'static [&'static str],
) -> ArgSpec {
    ArgSpec {
        name,
        description,
        choices,
        dynamic: false,
        kind: "string",
    }
}

/// A command with no declared arguments.
const fn bare(
    name: &'static str,
    aliases: &'static [&'static str],
    description: &'static str,
    category: &'static str,
    accepts_args: bool,
) -> Spec {
    Spec {
        name,
        aliases,
        description,
        category,
        accepts_args,
        args: &[],
    }
}

/// A command with the arguments it declares.
const fn with_args(
    name: &'static str,
    aliases: &'static [&'static str],
    description: &'static str,
    category: &'static str,
    args: &'static [ArgSpec],
) -> Spec {
    Spec {
        args,
        ..bare(name, aliases, description, category, true)
    }
}

/// The commands [`parse`] knows, in the order `commands.list` lists them.
const CATALOG: &[Spec] = &[
    bare(
        "help",
        &["help"],
        "Show available commands.",
        "status",
        false,
    ),
    bare(
        "commands",
        &["commands"],
        "List all slash commands.",
        "status",
        false,
    ),
    bare(
        "status",
        &["status"],
        "Show current status.",
        "status",
        true,
    ),
    bare("stop", &["stop"], "Stop the current run.", "session", false),
    bare(
        "reset",
        &["reset"],
        "Reset the current session.",
        "session",
        true,
    ),
    bare("new", &["new"], "Start a new session.", "session", true),
    with_args(
        "compact",
        &["compact"],
        "Compact the session context.",
        "session",
        &[text("instructions", "Extra compaction instructions")],
    ),
    with_args(
        "think",
        &["think", "thinking", "t"],
        "Set thinking level.",
        "options",
        &[ArgSpec {
            dynamic: true,
            ..text("level", "Thinking level")
        }],
    ),
    with_args(
        "reasoning",
        &["reasoning", "reason"],
        "Toggle reasoning visibility.",
        "options",
        &[one_of(
            "mode",
            "on, off, or stream",
            &["on", "off", "stream"],
        )],
    ),
    with_args(
        "verbose",
        &["verbose", "v"],
        "Toggle verbose mode.",
        "options",
        &[one_of("mode", "on, off, or full", &["on", "off", "full"])],
    ),
    with_args(
        "trace",
        &["trace"],
        "Toggle plugin trace lines.",
        "options",
        &[one_of("mode", "on, off, or raw", &["on", "off", "raw"])],
    ),
    with_args(
        "usage",
        &["usage"],
        "Usage footer or cost summary.",
        "options",
        &[one_of(
            "mode",
            "off, tokens, full, or cost",
            &["off", "tokens", "full", "cost"],
        )],
    ),
    with_args(
        "model",
        &["model"],
        "Show or set the session's model.",
        "options",
        &[text("model", "Model id (provider/model)")],
    ),
    with_args(
        "queue",
        &["queue"],
        "Adjust queue settings.",
        "options",
        &[
            one_of(
                "mode",
                "queue mode",
                &["steer", "followup", "collect", "interrupt"],
            ),
            text("debounce", "debounce duration (e.g. 500ms, 2s)"),
            number("cap", "queue cap"),
            one_of("drop", "drop policy", &["old", "new", "summarize"]),
        ],
    ),
];

impl ArgSpec {
    /// The catalog's entry for the argument.
    fn entry(&self) -> CommandArg {
        CommandArg {
            name: self.name.into(),
            description: self.description.into(),
            kind: self.kind.into(),
            dynamic: self.dynamic,
            choices: self
                .choices
                .iter()
                .map(|v| CommandChoice {
                    value: (*v).to_owned(),
                    label: (*v).to_owned(),
                })
                .collect(),
        }
    }
}

impl Spec {
    /// The catalog entry, with its arguments when `include_args`.
    fn entry(&self, include_args: bool) -> CommandEntry {
        CommandEntry {
            name: self.name.into(),
            native_name: self.name.into(),
            text_aliases: self.aliases.iter().map(|a| format!("/{a}")).collect(),
            description: self.description.into(),
            category: self.category.into(),
            source: "native".into(),
            scope: "both".into(),
            accepts_args: self.accepts_args,
            args: if include_args {
                self.args.iter().map(ArgSpec::entry).collect()
            } else {
                Vec::new()
            },
        }
    }
}

/// The groups `/commands` lists, in order, with their headings (OpenClaw's).
const GROUPS: &[(&str, &str)] = &[
    ("session", "Session"),
    ("options", "Options"),
    ("status", "Status"),
];

/// `/commands`: every command interpreted, by group, with its aliases and description, in
/// OpenClaw's layout.
pub(super) fn commands_text() -> String {
    let mut s = String::from("ℹ️ Slash commands\n");
    for (group, heading) in GROUPS {
        let listed: Vec<&Spec> = CATALOG.iter().filter(|c| c.category == *group).collect();
        if listed.is_empty() {
            continue;
        }
        s.push_str(&format!("\n{heading}\n"));
        for c in listed {
            let aliases: Vec<String> = c
                .aliases
                .iter()
                .filter(|a| **a != c.name)
                .map(|a| format!("/{a}"))
                .collect();
            let aliases = if aliases.is_empty() {
                String::new()
            } else {
                format!(" ({})", aliases.join(", "))
            };
            s.push_str(&format!("  /{}{aliases} - {}\n", c.name, c.description));
        }
    }
    s.trim_end().to_owned()
}

/// `/help`: the commands by group, in OpenClaw's layout (only what loopgate interprets).
pub(super) const HELP: &str = "ℹ️ Help\n\n\
    Session\n  /new  |  /reset  |  /compact  |  /stop\n\n\
    Options\n  /think <level>  |  /model <id>  |  /verbose on|off|full  |  /trace on|off|raw  |  /reasoning on|off|stream  |  /queue <mode>  |  /usage off|tokens|full|cost\n\n\
    Status\n  /status\n\n\
    More: /commands for full list";

/// Every command interpreted, as `commands.list` and `chat.metadata` list them: exactly
/// the ones [`parse`] knows (a test holds the two together).
pub(crate) fn catalog(include_args: bool) -> Vec<CommandEntry> {
    CATALOG.iter().map(|s| s.entry(include_args)).collect()
}

/// The reply texts OpenClaw was recorded giving (`chat-surface-2026.9.6.md` section 2).
pub(super) mod says {
    pub const NEW: &str = "✅ New session started.";
    pub const RESET: &str = "✅ Session reset.";
    pub const USAGE_FOOTER_RESET: &str = "⚙️ Usage footer: reset to default.";
    pub const TRACE_ADMIN_ONLY: &str =
        "❌ /trace is restricted to owners and gateway clients with operator.admin scope.";

    pub fn queue_set(mode: &str) -> String {
        format!("⚙️ Queue mode set to {mode}.")
    }

    pub const QUEUE_RESET: &str = "⚙️ Queue mode reset to default.";

    pub fn queue_debounce_set(ms: u64) -> String {
        format!("⚙️ Queue debounce set to {ms}ms.")
    }

    pub fn queue_cap_set(cap: u32) -> String {
        format!("⚙️ Queue cap set to {cap}.")
    }

    pub fn queue_drop_set(drop: &str) -> String {
        format!("⚙️ Queue drop set to {drop}.")
    }

    /// `/queue` alone: the session's queue settings and how to change them.
    pub fn queue_settings(mode: &str, debounce_ms: u64, cap: u32, drop: &str) -> String {
        format!(
            "Current queue settings: mode={mode}, debounce={debounce_ms}ms, cap={cap}, drop={drop}.\n\
             Options: modes steer, followup, collect, interrupt; debounce:<ms|s|m>, cap:<n>, drop:old|new|summarize."
        )
    }

    pub fn reasoning_set(mode: &str) -> String {
        match mode {
            "stream" => "⚙️ Reasoning stream enabled.".into(),
            "on" => "⚙️ Reasoning visibility enabled.".into(),
            _ => "⚙️ Reasoning visibility disabled.".into(),
        }
    }

    pub fn verbose_set(level: &str) -> String {
        match level {
            "full" => "⚙️ Verbose logging set to full.".into(),
            "on" => "⚙️ Verbose logging enabled.".into(),
            _ => "⚙️ Verbose logging disabled.".into(),
        }
    }

    pub fn think_unsupported(level: &str, model: &str, levels: &[&str]) -> String {
        format!(
            "Thinking level \"{level}\" is not supported for {model}. Use one of: {}.",
            levels.join(", ")
        )
    }

    pub fn think_set(level: &str) -> String {
        format!("⚙️ Thinking level set to {level}.")
    }

    pub fn model_default(model: &str) -> String {
        format!("Session model reset to configured default ({model}).")
    }

    pub fn model_set(model: &str) -> String {
        format!("⚙️ Session model set to {model}.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_message_command_is_parsed_with_its_aliases() {
        assert_eq!(parse("/new"), Some(Command::New(None)));
        assert_eq!(parse("  /NEW  "), Some(Command::New(None)));
        assert_eq!(
            parse("/new openai/gpt-5"),
            Some(Command::New(Some("openai/gpt-5".into())))
        );
        assert_eq!(parse("/reset"), Some(Command::Reset(None)));
        assert_eq!(parse("/stop"), Some(Command::Stop));
        assert_eq!(
            parse("/think high"),
            Some(Command::Think(Some("high".into())))
        );
        assert_eq!(parse("/t:high"), Some(Command::Think(Some("high".into()))));
        assert_eq!(parse("/thinking"), Some(Command::Think(None)));
        assert_eq!(
            parse("/reason stream"),
            Some(Command::Reasoning(Some("stream".into())))
        );
        assert_eq!(
            parse("/queue followup"),
            Some(Command::Queue(Some("followup".into())))
        );
        assert_eq!(
            parse("/compact keep the plan"),
            Some(Command::Compact(Some("keep the plan".into())))
        );
        assert_eq!(parse("/model"), Some(Command::Model(None)));
        assert_eq!(parse("/status"), Some(Command::Status));
        assert_eq!(
            parse("/v full"),
            Some(Command::Verbose(Some("full".into())))
        );
    }

    #[test]
    fn anything_else_is_a_message_for_the_model() {
        for text in [
            "hello",
            "/tmp/x is full",
            "/stop now please",
            "/newish",
            "please /new",
            "/new\nand then tell me a story",
            "/",
            "//new",
            "/unknowncommand arg",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
        assert_eq!(parse(&format!("/think {}", "x".repeat(5000))), None);
    }

    /// `/commands` and `/help` list what loopgate interprets, in OpenClaw's layout.
    #[test]
    fn help_and_commands_list_what_is_interpreted() {
        let text = commands_text();
        assert!(
            text.starts_with("ℹ️ Slash commands\n\nSession\n  /stop - Stop the current run."),
            "{text}"
        );
        assert!(
            text.contains("\n  /think (/thinking, /t) - Set thinking level.\n"),
            "{text}"
        );
        for e in catalog(false) {
            assert!(
                text.contains(&format!("/{} ", e.name)) || text.contains(&format!("/{} (", e.name)),
                "{} in {text}",
                e.name
            );
        }
        assert!(
            HELP.starts_with("ℹ️ Help\n\nSession\n  /new  |  /reset"),
            "{HELP}"
        );
        assert_eq!(parse("/help"), Some(Command::Help));
        assert_eq!(parse("/commands"), Some(Command::Commands));
        assert_eq!(parse("/help me"), None, "text for the model");
    }

    #[test]
    fn the_catalog_lists_exactly_what_is_interpreted() {
        let all = catalog(true);
        let mut names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "commands",
                "compact",
                "help",
                "model",
                "new",
                "queue",
                "reasoning",
                "reset",
                "status",
                "stop",
                "think",
                "trace",
                "usage",
                "verbose"
            ]
        );
        for e in &all {
            for alias in &e.text_aliases {
                let typed = if e.accepts_args {
                    format!("{alias} x")
                } else {
                    alias.clone()
                };
                assert!(
                    parse(&typed).is_some(),
                    "{typed} is listed but not interpreted"
                );
                assert!(parse(alias).is_some(), "{alias}");
            }
        }
        assert!(catalog(false).iter().all(|e| e.args.is_empty()));
        let think = serde_json::to_value(all.iter().find(|e| e.name == "think").unwrap()).unwrap();
        assert_eq!(
            think,
            serde_json::json!({"name":"think","nativeName":"think","textAliases":["/think","/thinking","/t"],"description":"Set thinking level.","category":"options","source":"native","scope":"both","acceptsArgs":true,"args":[{"name":"level","description":"Thinking level","type":"string","dynamic":true}]})
        );
    }

    /// R-B3: the values the catalog offers are exactly the ones the commands take (the
    /// four queue modes; the reasoning and verbose levels by their own names).
    #[test]
    fn every_offered_choice_is_a_value_its_command_takes() {
        let offered = |name: &str| -> Vec<String> {
            let all = catalog(true);
            let e = all.iter().find(|e| e.name == name).unwrap();
            e.args[0].choices.iter().map(|c| c.value.clone()).collect()
        };
        let modes: Vec<&str> = ipc::queue::QueueMode::ALL
            .iter()
            .map(|m| m.as_str())
            .collect();
        assert_eq!(offered("queue"), modes);
        for v in offered("reasoning") {
            let parsed = ipc::thinking::ReasoningMode::parse(&v).unwrap();
            assert_eq!(parsed.as_str(), v);
        }
        for v in offered("verbose") {
            let parsed = ipc::thinking::VerboseLevel::parse(&v).unwrap();
            assert_eq!(parsed.as_str(), v);
        }
        // The think levels depend on the model: offered by the client, not listed.
        assert!(offered("think").is_empty());
        let stop = catalog(true)
            .into_iter()
            .find(|e| e.name == "stop")
            .unwrap();
        assert!(!stop.accepts_args && stop.args.is_empty());
    }
}
