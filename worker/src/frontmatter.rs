//! The frontmatter of `SKILL.md` (`agent::skills`) and `HOOK.md` (`hooks`, internal hooks):
//! the one reader of both. It reads the small, lenient subset of YAML those files have always
//! been read as, not YAML: a block opened by a first line `---` and closed by the next `---`
//! line (or the end of the text), made of top-level `key: value` lines, each continued by the
//! lines below it that are indented or are `- ` items at column 0.
//!
//! Deliberately not a YAML parser: a YAML parser refuses what these files are known to hold
//! (an unquoted description with a colon in it, `description: Use when: deploying`) and reads
//! what they must not mean (a YAML flow mapping `{openclaw: ...}` where `metadata` must be
//! JSON to gate a skill; anchors and aliases). Lines that fit no rule are skipped, never an
//! error: a file with odd frontmatter still loads with what could be read.

/// One top-level `key: value` line of a frontmatter block and the lines that continue it.
#[derive(Debug, Clone, PartialEq)]
pub struct Field<'a> {
    /// The text before the line's first `:`, trimmed.
    pub key: &'a str,
    /// Everything after the first `:`, as written.
    pub value: &'a str,
    /// The lines below that continue it, as written: indented lines (whitespace-only ones
    /// included) and `- ` items at column 0.
    pub more: Vec<&'a str>,
}

/// The fields of the frontmatter that opens `text`, in file order (a key written twice comes
/// twice); none when `text` does not open with a `---` line.
pub fn fields(text: &str) -> Vec<Field<'_>> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut open: Option<Field<'_>> = None;
    for line in lines {
        if line.trim() == "---" {
            break;
        }
        if line.starts_with([' ', '\t']) || line.starts_with("- ") {
            if let Some(field) = open.as_mut() {
                field.more.push(line);
            }
            continue;
        }
        // Any other line ends the field above it; one without a colon is skipped.
        out.extend(open.take());
        open = line.split_once(':').map(|(key, value)| Field {
            key: key.trim(),
            value,
            more: Vec::new(),
        });
    }
    out.extend(open);
    out
}

impl Field<'_> {
    /// The value as one string: trimmed, without one pair of matching quotes around it (no
    /// escapes are read).
    pub fn scalar(&self) -> String {
        let v = self.value.trim();
        let quoted = v.len() >= 2
            && ((v.starts_with('"') && v.ends_with('"'))
                || (v.starts_with('\'') && v.ends_with('\'')));
        if quoted {
            v[1..v.len() - 1].to_owned()
        } else {
            v.to_owned()
        }
    }

    /// The value with its indented lines below it, newline-joined, up to the first line that
    /// is not indented: a flow value written over several lines (a JSON object).
    pub fn indented(&self) -> String {
        let mut out = self.value.to_owned();
        for line in self.more.iter().take_while(|l| l.starts_with([' ', '\t'])) {
            out.push('\n');
            out.push_str(line);
        }
        out
    }

    /// The value as a list: a flow list (`["a", 'b']`; empty items dropped), one bare value,
    /// or, when the value is empty, the `- item` lines below (indented or not) up to the first
    /// line that is not one. Quote characters around an item are stripped, matching or not.
    pub fn list(&self) -> Vec<String> {
        let unquote = |s: &str| s.trim().trim_matches(['"', '\'']).to_owned();
        let value = self.value.trim();
        if value.is_empty() {
            return self
                .more
                .iter()
                .map_while(|l| l.trim().strip_prefix("- "))
                .map(unquote)
                .collect();
        }
        value
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(unquote)
            .filter(|e| !e.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys<'a>(fields: &[Field<'a>]) -> Vec<&'a str> {
        fields.iter().map(|f| f.key).collect()
    }

    #[test]
    fn block_between_fences_or_nothing() {
        assert!(fields("no frontmatter\nname: x\n").is_empty());
        assert!(fields("").is_empty());
        assert!(
            fields("\n---\nname: x\n---\n").is_empty(),
            "the fence is the first line"
        );
        let f = fields("  ---  \nname: x\n  ---\nbody: not frontmatter\n");
        assert_eq!(keys(&f), ["name"]);
        // No closing fence: the block runs to the end.
        assert_eq!(keys(&fields("---\na: 1\nb: 2")), ["a", "b"]);
        // CRLF line ends.
        let f = fields("---\r\nname: x\r\n---\r\n");
        assert_eq!(f[0].scalar(), "x");
    }

    #[test]
    fn keys_values_and_continuations() {
        let f = fields(
            "---\nname : \"a: b\"\n# comment\nmetadata: {\"x\":\n  1}\n\tmore\n\nafter:\n  - i\n- j\nbad line\n  orphan\nname: again\n---\n",
        );
        assert_eq!(keys(&f), ["name", "metadata", "after", "name"]);
        assert_eq!(f[0].value, " \"a: b\"");
        assert_eq!(f[0].scalar(), "a: b");
        assert!(f[0].more.is_empty(), "a comment line ends the field");
        assert_eq!(f[1].more, ["  1}", "\tmore"], "a blank line ends it");
        assert_eq!(f[1].indented(), " {\"x\":\n  1}\n\tmore");
        assert_eq!(f[2].more, ["  - i", "- j"]);
        assert_eq!(f[3].scalar(), "again");
    }

    #[test]
    fn scalars_lose_one_matching_pair_of_quotes() {
        let one = |v: &str| fields(&format!("---\nk:{v}\n---\n"))[0].scalar();
        assert_eq!(one(" plain "), "plain");
        assert_eq!(one(" 'single'"), "single");
        assert_eq!(one(" \"\"double\"\""), "\"double\"");
        assert_eq!(one(" \"mixed'"), "\"mixed'");
        assert_eq!(one(" \"quoted\" word"), "\"quoted\" word");
        assert_eq!(one(" \""), "\"");
        assert_eq!(one(""), "");
    }

    #[test]
    fn indented_stops_at_a_column_zero_item() {
        let f = fields("---\nmetadata: {\n  \"a\": 1\n- x\n  }\n---\n");
        assert_eq!(f[0].indented(), " {\n  \"a\": 1");
    }

    #[test]
    fn lists_flow_block_or_bare() {
        let list = |text: &str| fields(text)[0].list();
        assert_eq!(list("---\ne: [\"a\", 'b', , c]\n---\n"), ["a", "b", "c"]);
        assert_eq!(list("---\ne: [[a]]\n---\n"), ["a"]);
        assert_eq!(list("---\ne: one:two\n---\n"), ["one:two"]);
        assert_eq!(list("---\ne: \"a'\n---\n"), ["a"], "any quotes stripped");
        assert_eq!(
            list("---\ne:\n  - a\n- 'b'\n  - \"\"\n  x: 1\n  - after\n---\n"),
            ["a", "b", ""]
        );
        assert!(
            list("---\ne:\n\n  - a\n---\n").is_empty(),
            "a blank line ends it"
        );
        assert!(list("---\ne:\n-a\n---\n").is_empty());
        assert!(list("---\ne: []\n---\n").is_empty());
    }
}
