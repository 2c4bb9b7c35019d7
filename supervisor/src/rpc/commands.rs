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
    Status,
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
        "status" => Command::Status,
        _ => return None,
    })
}

fn choices(values: &[&str]) -> Vec<CommandChoice> {
    values
        .iter()
        .map(|v| CommandChoice {
            value: (*v).to_owned(),
            label: (*v).to_owned(),
        })
        .collect()
}

fn arg(name: &str, description: &str, kind: &str, values: &[&str]) -> CommandArg {
    CommandArg {
        name: name.into(),
        description: description.into(),
        kind: kind.into(),
        dynamic: false,
        choices: choices(values),
    }
}

fn entry(
    name: &str,
    aliases: &[&str],
    description: &str,
    category: &str,
    accepts_args: bool,
    args: Vec<CommandArg>,
) -> CommandEntry {
    CommandEntry {
        name: name.into(),
        native_name: name.into(),
        text_aliases: aliases.iter().map(|a| format!("/{a}")).collect(),
        description: description.into(),
        category: category.into(),
        source: "native".into(),
        scope: "both".into(),
        accepts_args,
        args,
    }
}

/// Every command interpreted, as `commands.list` and `chat.metadata` list them: exactly
/// the ones [`parse`] knows (a test holds the two together).
pub(crate) fn catalog(include_args: bool) -> Vec<CommandEntry> {
    let think_level = CommandArg {
        dynamic: true,
        ..arg("level", "Thinking level", "string", &[])
    };
    let mut all = vec![
        entry(
            "status",
            &["status"],
            "Show current status.",
            "status",
            true,
            vec![],
        ),
        entry(
            "stop",
            &["stop"],
            "Stop the current run.",
            "session",
            false,
            vec![],
        ),
        entry(
            "reset",
            &["reset"],
            "Reset the current session.",
            "session",
            true,
            vec![],
        ),
        entry(
            "new",
            &["new"],
            "Start a new session.",
            "session",
            true,
            vec![],
        ),
        entry(
            "compact",
            &["compact"],
            "Compact the session context.",
            "session",
            true,
            vec![arg(
                "instructions",
                "Extra compaction instructions",
                "string",
                &[],
            )],
        ),
        entry(
            "think",
            &["think", "thinking", "t"],
            "Set thinking level.",
            "options",
            true,
            vec![think_level],
        ),
        entry(
            "reasoning",
            &["reasoning", "reason"],
            "Toggle reasoning visibility.",
            "options",
            true,
            vec![arg(
                "mode",
                "on, off, or stream",
                "string",
                &["on", "off", "stream"],
            )],
        ),
        entry(
            "verbose",
            &["verbose", "v"],
            "Toggle verbose mode.",
            "options",
            true,
            vec![arg(
                "mode",
                "on, off, or full",
                "string",
                &["on", "off", "full"],
            )],
        ),
        entry(
            "model",
            &["model"],
            "Show or set the session's model.",
            "options",
            true,
            vec![arg("model", "Model id (provider/model)", "string", &[])],
        ),
        entry(
            "queue",
            &["queue"],
            "Adjust queue settings.",
            "options",
            true,
            vec![arg(
                "mode",
                "queue mode",
                "string",
                &["steer", "followup", "collect", "interrupt"],
            )],
        ),
    ];
    if !include_args {
        for e in &mut all {
            e.args.clear();
        }
    }
    all
}

/// The reply texts OpenClaw was recorded giving (`chat-surface-2026.9.6.md` section 2).
pub(super) mod says {
    pub const NEW: &str = "✅ New session started.";
    pub const RESET: &str = "✅ Session reset.";

    pub fn queue_set(mode: &str) -> String {
        format!("⚙️ Queue mode set to {mode}.")
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

    #[test]
    fn the_catalog_lists_exactly_what_is_interpreted() {
        let all = catalog(true);
        let mut names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "compact",
                "model",
                "new",
                "queue",
                "reasoning",
                "reset",
                "status",
                "stop",
                "think",
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
        let think = serde_json::to_value(&all[5]).unwrap();
        assert_eq!(
            think,
            serde_json::json!({"name":"think","nativeName":"think","textAliases":["/think","/thinking","/t"],"description":"Set thinking level.","category":"options","source":"native","scope":"both","acceptsArgs":true,"args":[{"name":"level","description":"Thinking level","type":"string","dynamic":true}]})
        );
    }
}
