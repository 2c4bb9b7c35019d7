//! The `apply_patch` format (`*** Begin Patch` ... `*** End Patch`), read and applied to text.
//! Pure: [`parse`] turns the model's input into file operations, [`apply_chunks`] gives a
//! file's new text; the file system side is `apply_patch.rs`. The error texts are OpenClaw's
//! (`tools-cron-2026.9.6.md` section 3).

/// One file's part of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// A new file with this text.
    Add {
        path: String,
        text: String,
    },
    Delete {
        path: String,
    },
    /// Changes by hunks, and maybe a new name.
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

impl FileOp {
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// One hunk of an update: the lines it expects (context and removed) and what replaces
/// them (context and added), found after the line `anchor` when the `@@` names one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunk {
    pub anchor: Option<String>,
    pub old: Vec<String>,
    pub new: Vec<String>,
    /// `*** End of File`: the lines are the file's last.
    pub at_eof: bool,
    /// How many of its last lines came from blank patch lines (while parsing).
    pub blank_tail: usize,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const EOF_MARK: &str = "*** End of File";

/// Reads a patch; the error is OpenClaw's text for what is wrong, naming the line.
pub fn parse(input: &str) -> Result<Vec<FileOp>, String> {
    let text = input.trim();
    if text.is_empty() {
        return Err("Invalid patch: input is empty.".into());
    }
    let lines: Vec<&str> = text.lines().map(|l| l.trim_end_matches('\r')).collect();
    if lines.first().map(|l| l.trim()) != Some(BEGIN) {
        return Err(format!("The first line of the patch must be '{BEGIN}'"));
    }
    if lines.len() < 2 || lines.last().map(|l| l.trim()) != Some(END) {
        return Err(format!("The last line of the patch must be '{END}'"));
    }
    let body = &lines[1..lines.len() - 1];
    let mut ops = Vec::new();
    let mut i = 0;
    while i < body.len() {
        // Line numbers are the patch's, from 1 (the `Begin` line is 1).
        let number = i + 2;
        let line = body[i];
        if let Some(path) = line.strip_prefix(ADD) {
            let mut text = String::new();
            i += 1;
            while let Some(added) = body.get(i).and_then(|l| l.strip_prefix('+')) {
                text.push_str(added);
                text.push('\n');
                i += 1;
            }
            ops.push(FileOp::Add {
                path: path.trim().to_owned(),
                text,
            });
        } else if let Some(path) = line.strip_prefix(DELETE) {
            ops.push(FileOp::Delete {
                path: path.trim().to_owned(),
            });
            i += 1;
        } else if let Some(path) = line.strip_prefix(UPDATE) {
            let path = path.trim().to_owned();
            i += 1;
            let move_to = body
                .get(i)
                .and_then(|l| l.strip_prefix(MOVE))
                .map(|m| m.trim().to_owned());
            if move_to.is_some() {
                i += 1;
            }
            let (chunks, next) = chunks(body, i)?;
            if chunks.is_empty() {
                return Err(format!(
                    "Invalid patch hunk at line {number}: Update file hunk for path '{path}' is empty"
                ));
            }
            i = next;
            ops.push(FileOp::Update {
                path,
                move_to,
                chunks,
            });
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(format!(
                "Invalid patch hunk at line {number}: '{line}' is not a valid hunk header. Valid hunk headers: '*** Add File: {{path}}', '*** Delete File: {{path}}', '*** Update File: {{path}}'"
            ));
        }
    }
    Ok(ops)
}

/// The hunks of an update from `body[start]` on, up to the next file's header; where they end.
fn chunks(body: &[&str], start: usize) -> Result<(Vec<Chunk>, usize), String> {
    let mut out: Vec<Chunk> = Vec::new();
    let mut i = start;
    while let Some(&line) = body.get(i) {
        if [ADD, DELETE, UPDATE].iter().any(|h| line.starts_with(h)) {
            break;
        }
        let number = i + 2;
        if let Some(anchor) = line.strip_prefix("@@") {
            let anchor = anchor.trim();
            out.push(Chunk {
                anchor: (!anchor.is_empty()).then(|| anchor.to_owned()),
                ..Chunk::default()
            });
            i += 1;
            continue;
        }
        if line.trim() == EOF_MARK {
            if let Some(c) = out.last_mut() {
                c.at_eof = true;
            }
            i += 1;
            continue;
        }
        // The first hunk may leave out its `@@`.
        if out.is_empty() {
            if !matches!(line.chars().next(), Some(' ' | '+' | '-') | None) {
                return Err(format!(
                    "Invalid patch hunk at line {number}: Expected update hunk to start with a @@ context marker, got: '{line}'"
                ));
            }
            out.push(Chunk::default());
        }
        let Some(c) = out.last_mut() else { break };
        if !line.is_empty() {
            c.blank_tail = 0;
        }
        match line.chars().next() {
            Some(' ') => {
                c.old.push(line[1..].to_owned());
                c.new.push(line[1..].to_owned());
            }
            // An empty line is an empty context line (or spacing, if the hunk ends there).
            None => {
                c.old.push(String::new());
                c.new.push(String::new());
                c.blank_tail += 1;
                i += 1;
                continue;
            }
            Some('-') => c.old.push(line[1..].to_owned()),
            Some('+') => c.new.push(line[1..].to_owned()),
            _ => {
                return Err(format!(
                    "Invalid patch hunk at line {number}: Unexpected line found in update hunk: '{line}'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)"
                ))
            }
        }
        i += 1;
    }
    // Blank lines at a hunk's end are the patch's spacing (before the next file or the
    // end), not context the file must have.
    for c in &mut out {
        while c.blank_tail > 0 && c.old.last().is_some_and(String::is_empty) {
            c.old.pop();
            c.new.pop();
            c.blank_tail -= 1;
        }
    }
    // A `@@` with nothing under it changes nothing.
    out.retain(|c| !(c.old.is_empty() && c.new.is_empty()));
    Ok((out, i))
}

/// `original` with `chunks` applied in order (each found after the previous one); `shown`
/// names the file in the error. The result ends with a newline, as a patched file does.
pub fn apply_chunks(original: &str, chunks: &[Chunk], shown: &str) -> Result<String, String> {
    let mut lines: Vec<&str> = original.split('\n').collect();
    if original.ends_with('\n') || original.is_empty() {
        lines.pop();
    }
    if lines.len() > MAX_LINES {
        return Err(format!(
            "Failed to read file to update {shown}: more than {MAX_LINES} lines to patch"
        ));
    }
    let mut edits: Vec<(usize, usize, &[String])> = Vec::new();
    let mut cursor = 0;
    let mut work = MAX_LINE_COMPARISONS;
    for c in chunks {
        if let Some(anchor) = &c.anchor {
            match find(
                &lines,
                std::slice::from_ref(anchor),
                cursor,
                false,
                &mut work,
            )? {
                Some(at) => cursor = at + 1,
                None => return Err(format!("Failed to find context '{anchor}' in {shown}")),
            }
        }
        if c.old.is_empty() {
            // Only added lines: they go at the end of the file.
            edits.push((lines.len(), 0, &c.new));
            continue;
        }
        let Some(at) = find(&lines, &c.old, cursor, c.at_eof, &mut work)? else {
            return Err(format!(
                "Failed to find expected lines in {shown}:\n{}",
                c.old.join("\n")
            ));
        };
        edits.push((at, c.old.len(), &c.new));
        cursor = at + c.old.len();
    }
    // In the file's order (a hunk of only added lines goes last); two that overlap are an
    // error, as one file's hunks never overlap in a real patch.
    edits.sort_by_key(|(at, len, _)| (*at, *len));
    let mut text = String::with_capacity(original.len());
    let mut next = 0;
    for (at, len, new) in edits {
        if at < next {
            return Err(format!(
                "Failed to apply the hunks to {shown}: two of them change the same lines"
            ));
        }
        for l in &lines[next..at] {
            text.push_str(l);
            text.push('\n');
        }
        for l in new {
            text.push_str(l);
            text.push('\n');
        }
        next = at + len;
    }
    for l in &lines[next..] {
        text.push_str(l);
        text.push('\n');
    }
    Ok(text)
}

/// Most lines a patched file may have (its lines are indexed while the hunks are found).
const MAX_LINES: usize = 1_000_000;

/// Line comparisons one file's hunks may cost: a hunk of many lines that almost matches
/// everywhere in a long file (hostile input) costs their product; past this the patch is
/// refused rather than wedge the worker (a real patch needs a tiny fraction of it).
const MAX_LINE_COMPARISONS: u64 = 50_000_000;

/// Where `want` stands in `lines` from `from` on: exactly, else ignoring trailing, else
/// surrounding whitespace; at the end of the file when `at_eof` (else the first place).
/// Each line compared is taken from `work`; none left is an error.
fn find(
    lines: &[&str],
    want: &[String],
    from: usize,
    at_eof: bool,
    work: &mut u64,
) -> Result<Option<usize>, String> {
    if want.len() > lines.len() {
        return Ok(None);
    }
    let last = lines.len() - want.len();
    let exact = |w: &str, l: &str| w == l;
    let trailing = |w: &str, l: &str| w.trim_end() == l.trim_end();
    let trimmed = |w: &str, l: &str| w.trim() == l.trim();
    for same in [&exact as &dyn Fn(&str, &str) -> bool, &trailing, &trimmed] {
        let starts = if at_eof {
            (last >= from).then_some(last..=last)
        } else {
            Some(from..=last)
        };
        for at in starts.into_iter().flatten() {
            let mut all = true;
            for (w, l) in want.iter().zip(&lines[at..]) {
                *work = work.checked_sub(1).ok_or_else(|| {
                    "Patch too costly to apply: its hunks would be compared with too many lines; send smaller hunks".to_owned()
                })?;
                if !same(w, l) {
                    all = false;
                    break;
                }
            }
            if all {
                return Ok(Some(at));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
