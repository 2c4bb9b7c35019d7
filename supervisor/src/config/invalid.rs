//! What validation refuses: the key a value is written under and what is wrong with it.
//!
//! The key is a field, not the start of a message, so the line of the file an error points
//! at (`config_lines`) is found from the key itself.

/// A refused config value: `key` is the dotted path with `[i]` indices
/// (`agents.list.ops.max_concurrent`, `hooks.before_tool_call[1].command`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct Invalid {
    pub key: String,
    pub problem: String,
}

impl Invalid {
    pub fn new(key: impl Into<String>, problem: impl Into<String>) -> Invalid {
        Invalid {
            key: key.into(),
            problem: problem.into(),
        }
    }
}

/// `[cluster]`'s own refusals name their key the same way.
impl From<cluster::SettingsError> for Invalid {
    fn from(e: cluster::SettingsError) -> Invalid {
        Invalid::new(e.key, e.problem)
    }
}
