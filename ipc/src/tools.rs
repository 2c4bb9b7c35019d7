//! The one table of built-in tools: each tool's name, what the model is told of it, its
//! parameter schema, its policy class and how a verbose reply names it, written once. The
//! worker builds its definitions from it and runs each [`ToolId`] (a tool without a runner
//! does not compile); the supervisor checks `tools.allow` and bounds metric labels by its
//! names; verbose summaries read its labels.
//!
//! Adding a tool: one entry here and one [`ToolId`] variant, then its runner in the worker's
//! `tools::execute` (the compiler asks for it).

/// A built-in tool, as the worker runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolId {
    Read,
    Write,
    Edit,
    ApplyPatch,
    Ls,
    Message,
    Exec,
    Process,
    WebFetch,
    MemorySearch,
    MemoryGet,
}

/// What a tool may touch, for policies that treat tools alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    /// Reads files inside the workspace.
    ReadFiles,
    /// Writes files inside the workspace (the disk budget applies).
    WriteFiles,
    /// Sends a message to the conversation (the `message_sending` guards apply).
    Message,
    /// Runs a command (the exec policy and approvals apply).
    Exec,
    /// Reads from the network (the agent's `tools.web_fetch` address policy applies).
    Web,
    /// Reads the agent's memory files (`MEMORY.md`, `USER.md`, `memory/**/*.md`) only.
    Memory,
}

/// How a verbose reply names a tool's call: `📖 Read: `path``.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Display {
    pub emoji: &'static str,
    pub label: &'static str,
    /// The argument that says what the call worked on (`""`: none).
    pub detail: &'static str,
}

/// One built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    pub id: ToolId,
    pub name: &'static str,
    pub description: &'static str,
    /// The JSON Schema of its arguments, as JSON text.
    pub schema: &'static str,
    pub class: ToolClass,
    pub display: Display,
}

/// The tool that sends a message to the conversation the run came from.
pub const MESSAGE_TOOL: &str = "message";

/// Every built-in tool, in the order models are offered them.
pub const TOOLS: &[Tool] = &[
    Tool {
        id: ToolId::Read,
        name: "read",
        description: "Read a text file in the workspace. offset is the first line (1-based), limit the number of lines.",
        schema: r#"{"type":"object","additionalProperties":false,"required":["path"],"properties":{"path":{"type":"string"},"offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1}}}"#,
        class: ToolClass::ReadFiles,
        display: Display { emoji: "📖", label: "Read", detail: "path" },
    },
    Tool {
        id: ToolId::Write,
        name: "write",
        description: "Create or overwrite a text file in the workspace.",
        schema: r#"{"type":"object","additionalProperties":false,"required":["path","content"],"properties":{"path":{"type":"string"},"content":{"type":"string"}}}"#,
        class: ToolClass::WriteFiles,
        display: Display { emoji: "✍️", label: "Write", detail: "path" },
    },
    Tool {
        id: ToolId::Edit,
        name: "edit",
        description: "Replace exact text in a workspace file. Each oldText must occur exactly once.",
        schema: r#"{"type":"object","additionalProperties":false,"required":["path","edits"],"properties":{"path":{"type":"string"},"edits":{"type":"array","minItems":1,"items":{"type":"object","additionalProperties":false,"required":["oldText","newText"],"properties":{"oldText":{"type":"string","minLength":1},"newText":{"type":"string"}}}}}}"#,
        class: ToolClass::WriteFiles,
        display: Display { emoji: "📝", label: "Edit", detail: "path" },
    },
    Tool {
        id: ToolId::ApplyPatch,
        name: "apply_patch",
        description: "Patch one/many files. Input requires *** Begin Patch and *** End Patch.",
        schema: r#"{"type":"object","required":["input"],"properties":{"input":{"type":"string","description":"Patch content using the *** Begin Patch/End Patch format."}}}"#,
        class: ToolClass::WriteFiles,
        display: Display { emoji: "🩹", label: "Apply Patch", detail: "" },
    },
    Tool {
        id: ToolId::Ls,
        name: "ls",
        description: "List a directory in the workspace.",
        schema: r#"{"type":"object","additionalProperties":false,"properties":{"path":{"type":"string"}}}"#,
        class: ToolClass::ReadFiles,
        display: Display { emoji: "🧩", label: "Ls", detail: "path" },
    },
    Tool {
        id: ToolId::Message,
        name: MESSAGE_TOOL,
        description: "Send a message to the user now, in the conversation this request came from (for progress or the answer itself). Do not repeat it in your final reply.",
        schema: r#"{"type":"object","additionalProperties":false,"required":["text"],"properties":{"text":{"type":"string","minLength":1}}}"#,
        class: ToolClass::Message,
        display: Display { emoji: "✉️", label: "Message", detail: "" },
    },
    Tool {
        id: ToolId::Exec,
        name: "exec",
        description: "Run a shell command in the workspace (subject to the agent's exec policy); background continuation supported. Completed calls return command output directly. Use process only when exec reports running with a sessionId.",
        schema: r#"{"type":"object","additionalProperties":false,"required":["command"],"properties":{"command":{"type":"string","minLength":1},"timeoutSeconds":{"type":"integer","minimum":0,"maximum":86400,"description":"Foreground: seconds before the command is killed. Background: process lifetime in seconds (default 1800; 0 means the longest, 24 h)."},"yieldMs":{"type":"integer","minimum":0,"description":"Milliseconds before backgrounding; without it (and without background) the command runs in the foreground to its timeout."},"background":{"type":"boolean","description":"Background now; timeoutSeconds applies."},"pty":{"type":"boolean","description":"Background: give the command a writable stdin (a pipe) for process write/submit/send-keys/paste."}}}"#,
        class: ToolClass::Exec,
        display: Display { emoji: "🛠️", label: "Exec", detail: "command" },
    },
    Tool {
        id: ToolId::Process,
        name: "process",
        description: "Control existing exec: list, poll, log, write, send-keys, submit, paste, kill. poll/log: status, output, quiet success, completion. Others: input/intervention. No polling as timer/reminder.",
        schema: r#"{"type":"object","additionalProperties":false,"required":["action"],"properties":{"action":{"type":"string","enum":["list","poll","log","write","send-keys","submit","paste","kill","clear","remove"]},"sessionId":{"type":"string","description":"Required for every action except list."},"data":{"type":"string"},"keys":{"type":"array","items":{"type":"string"}},"hex":{"type":"array","items":{"type":"string"}},"literal":{"type":"string"},"text":{"type":"string"},"bracketed":{"type":"boolean"},"eof":{"type":"boolean"},"offset":{"type":"integer","minimum":0,"description":"Log offset"},"limit":{"type":"integer","minimum":0,"description":"Log length"},"timeout":{"type":"integer","minimum":0,"description":"For poll: wait up to this many milliseconds for new output or exit; max 30000 ms"}}}"#,
        class: ToolClass::Exec,
        display: Display { emoji: "⚙️", label: "Process", detail: "sessionId" },
    },
    Tool {
        id: ToolId::WebFetch,
        name: "web_fetch",
        description: "Fetch URL; extract readable markdown/text. Lightweight; no browser automation.",
        schema: r#"{"type":"object","required":["url"],"properties":{"url":{"type":"string","description":"HTTP(S) URL."},"extractMode":{"type":"string","enum":["markdown","text"],"description":"Extraction mode (markdown or text).","default":"markdown"},"maxChars":{"type":"integer","minimum":100,"description":"Maximum characters to return (truncates when exceeded)."}}}"#,
        class: ToolClass::Web,
        display: Display { emoji: "🌐", label: "Web Fetch", detail: "url" },
    },
    Tool {
        id: ToolId::MemorySearch,
        name: "memory_search",
        description: "Mandatory recall step: search MEMORY.md, USER.md, Markdown files recursively under memory/ before answering questions about prior work, decisions, dates, people, preferences, or todos. Full-text (keyword) search; each result has path, startLine, endLine, snippet and citation. corpus=memory (default) or all searches the memory files; loopgate has no wiki and does not index sessions.",
        schema: r#"{"type":"object","additionalProperties":false,"required":["query"],"properties":{"query":{"type":"string"},"maxResults":{"type":"integer","minimum":1},"minScore":{"type":"number"},"corpus":{"type":"string","enum":["memory","wiki","all","sessions"]}}}"#,
        class: ToolClass::Memory,
        display: Display { emoji: "🧠", label: "Memory Search", detail: "query" },
    },
    Tool {
        id: ToolId::MemoryGet,
        name: "memory_get",
        description: "Safe exact excerpt read from MEMORY.md, USER.md, Markdown files recursively under memory/. Defaults to a bounded excerpt when lines are omitted and includes truncation/continuation info when more content exists. status=ok means the requested excerpt was read; status=not_found means the file does not exist; status=error means the read failed or the path is not a memory file.",
        schema: r#"{"type":"object","additionalProperties":false,"required":["path"],"properties":{"path":{"type":"string"},"from":{"type":"integer","minimum":1},"lines":{"type":"integer","minimum":1},"corpus":{"type":"string","enum":["memory","wiki","all"]}}}"#,
        class: ToolClass::Memory,
        display: Display { emoji: "📓", label: "Memory Get", detail: "path" },
    },
];

/// The tools' names, in [`TOOLS`] order.
pub const TOOL_NAMES: [&str; TOOLS.len()] = {
    let mut names = [""; TOOLS.len()];
    let mut i = 0;
    while i < TOOLS.len() {
        names[i] = TOOLS[i].name;
        i += 1;
    }
    names
};

/// The tool named `name`.
pub fn find(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

/// Whether `name` is in an agent's `tools.allow` list (`None`: every tool is): what the
/// worker offers its model and what `tools.effective` tells operators.
#[inline]
pub fn allowed(allow: Option<&[String]>, name: &str) -> bool {
    allow.is_none_or(|list| list.iter().any(|t| t == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_named_once_with_a_schema_that_parses() {
        let mut names = std::collections::HashSet::new();
        let mut ids = std::collections::HashSet::new();
        for t in TOOLS {
            assert!(names.insert(t.name), "{} twice", t.name);
            assert!(ids.insert(t.id), "{:?} twice", t.id);
            let schema: serde_json::Value = serde_json::from_str(t.schema).unwrap();
            assert_eq!(schema["type"], "object", "{}", t.name);
            assert_eq!(find(t.name), Some(t));
        }
        assert_eq!(
            TOOL_NAMES,
            [
                "read",
                "write",
                "edit",
                "apply_patch",
                "ls",
                "message",
                "exec",
                "process",
                "web_fetch",
                "memory_search",
                "memory_get"
            ]
        );
        assert_eq!(find("nope"), None);
    }
}
