//! Where a config key is written: the line a validation error points at.
//!
//! Validation runs on the deserialized config, which has no positions, and names the key it
//! refuses (`config::Invalid::key`) (`agents.list.ops.max_concurrent`, `hooks.before_tool_call[1].command`). This
//! module finds that key in the file's text again. A key that is not written (a default, or
//! inherited from `agents.defaults`) resolves to the deepest part of its path that is.

use std::ops::Range;

use toml_edit::{ImDocument, Item, Table, TableLike, Value};

/// The 1-based line of `path` (dotted, with `[i]` indices) in `text`, or of the deepest
/// written part of it; `None` when nothing of it is written or `text` does not parse.
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    let doc = ImDocument::parse(text).ok()?;
    let span = locate(doc.as_table(), path)?;
    Some(text.get(..span.start)?.matches('\n').count() + 1)
}

/// One step down the document.
#[derive(Clone, Copy)]
enum Node<'a> {
    Item(&'a Item),
    Table(&'a Table),
    Value(&'a Value),
}

impl<'a> Node<'a> {
    fn table_like(self) -> Option<&'a dyn TableLike> {
        match self {
            Node::Item(i) => i.as_table_like(),
            Node::Table(t) => Some(t),
            Node::Value(v) => v.as_inline_table().map(|t| t as &dyn TableLike),
        }
    }

    /// Element `i` of an array or array of tables, and where it is written.
    fn index(self, i: usize) -> Option<(Node<'a>, Option<Range<usize>>)> {
        let array = match self {
            Node::Item(Item::ArrayOfTables(a)) => {
                let t = a.get(i)?;
                return Some((Node::Table(t), t.span()));
            }
            Node::Item(Item::Value(Value::Array(a))) | Node::Value(Value::Array(a)) => a,
            _ => return None,
        };
        let v = array.get(i)?;
        Some((Node::Value(v), v.span()))
    }
}

fn locate(root: &Table, path: &str) -> Option<Range<usize>> {
    let mut node = Node::Table(root);
    let mut at: Option<Range<usize>> = None;
    for segment in path.split('.') {
        let (name, indices) = split_indices(segment)?;
        let Some((key, item)) = node.table_like().and_then(|t| t.get_key_value(name)) else {
            break;
        };
        at = key.span().or_else(|| item.span()).or(at);
        node = Node::Item(item);
        for i in indices {
            let Some((next, span)) = node.index(i) else {
                return at;
            };
            at = span.or(at);
            node = next;
        }
    }
    at
}

/// `name[1][2]` → (`name`, [1, 2]).
fn split_indices(segment: &str) -> Option<(&str, Vec<usize>)> {
    let (name, mut rest) = match segment.find('[') {
        Some(i) => (&segment[..i], &segment[i..]),
        None => (segment, ""),
    };
    let mut indices = Vec::new();
    while let Some(inner) = rest.strip_prefix('[') {
        let (n, after) = inner.split_once(']')?;
        indices.push(n.parse().ok()?);
        rest = after;
    }
    Some((name, indices))
}

/// A TOML parser's message without the source lines it quotes (`3 | token = "..."`): the
/// line and column stay, the file's text (which may hold the gateway token) goes, so the
/// message may be logged and shown to any reader.
pub(crate) fn without_source(message: &str) -> String {
    message
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            let digits = t.trim_start_matches(|c: char| c.is_ascii_digit());
            !digits.trim_start().starts_with('|')
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# comment
[gateway]
port = 1
max_connections = 0

[agents.list.ops]
max_concurrent = 0
tools = { exec = { security = "allowlist", allowlist = ["ok", "bad pattern"] } }

[[hooks.before_tool_call]]
command = ["/bin/true"]

[[hooks.before_tool_call]]
command = ["relative"]
"#;

    #[test]
    fn finds_a_written_key() {
        assert_eq!(line_of(TEXT, "gateway.max_connections"), Some(4));
        assert_eq!(line_of(TEXT, "agents.list.ops.max_concurrent"), Some(7));
    }

    #[test]
    fn finds_inline_tables_arrays_and_arrays_of_tables() {
        assert_eq!(
            line_of(TEXT, "agents.list.ops.tools.exec.allowlist[1]"),
            Some(8)
        );
        assert_eq!(line_of(TEXT, "hooks.before_tool_call[1].command"), Some(14));
        assert_eq!(line_of(TEXT, "hooks.before_tool_call[0]"), Some(10));
    }

    #[test]
    fn an_unwritten_key_points_at_its_deepest_written_parent() {
        assert_eq!(line_of(TEXT, "agents.list.ops.model"), Some(6));
        assert_eq!(line_of(TEXT, "gateway.bind"), Some(2));
        assert_eq!(line_of(TEXT, "workers.crash_loop_max"), None);
        assert_eq!(line_of("not = [toml", "not"), None);
    }
}
