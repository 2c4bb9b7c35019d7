//! `exec` allowlists: a command is split into words the way a shell would split a simple
//! command with quotes, but anything a shell would interpret (separators, redirections,
//! substitutions, globs, variables, comments, line breaks) is refused, and the words run as
//! an argv with no shell. A pattern matches words, never characters across a word boundary.
//!
//! Pattern words are typed by the quoting the operator wrote: the first is the program,
//! literally (a bare name found on `PATH`, or an absolute path). Later words match one
//! argument each; a `*` written outside quotes inside a word matches any run of characters
//! within that argument, while a quoted `'*'` / `"*"` (or `\*`) is the character `*`; a last
//! word that is exactly an unquoted `*` matches one or more remaining arguments.
//! Which commands may be allowed for good (`allow-always`) is [`crate::safe`]'s.

/// Characters that mean something to a shell outside quotes; a command holding any of them
/// is refused under `allowlist`.
const SHELL_SYNTAX: &[char] = &[
    ';', '&', '|', '<', '>', '(', ')', '$', '`', '\\', '*', '?', '[', ']', '{', '}', '~', '!', '#',
    '\n', '\r', '\0',
];

/// One word of a pattern: its literal pieces, split where the operator wrote an unquoted
/// `*`. One piece: a literal word; `["", ""]`: exactly `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternWord {
    pieces: Vec<String>,
}

impl PatternWord {
    /// The word's text when it has no wildcard.
    pub fn literal(&self) -> Option<&str> {
        match self.pieces.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Whether it is exactly an unquoted `*`.
    fn is_star(&self) -> bool {
        self.pieces.len() == 2 && self.pieces.iter().all(String::is_empty)
    }

    /// Whether `text` (one whole argument) matches: each wildcard any run of characters.
    pub fn matches(&self, text: &str) -> bool {
        let (first, middle, last) = match self.pieces.as_slice() {
            [one] => return one == text,
            [first, middle @ .., last] => (first, middle, last),
            [] => return false,
        };
        // Both ends match first, so the slice below falls on character boundaries.
        if text.len() < first.len() + last.len()
            || !text.starts_with(first.as_str())
            || !text.ends_with(last.as_str())
        {
            return false;
        }
        let mut rest = &text[first.len()..text.len() - last.len()];
        for part in middle {
            match rest.find(part.as_str()) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

/// A parsed allowlist pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    program: String,
    args: Vec<PatternWord>,
    /// The last word was an unquoted `*`: one or more further arguments, any.
    rest: bool,
}

impl Pattern {
    /// The program, literally.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The argument words before a trailing `*`.
    pub fn args(&self) -> &[PatternWord] {
        &self.args
    }

    /// Whether a trailing unquoted `*` allows one or more further arguments.
    pub fn rest(&self) -> bool {
        self.rest
    }
}

/// Splits `command` into words (`'...'` is literal; `"..."` is literal but may not hold
/// `$`, `` ` `` or `\`). `Err` names the first shell construct found.
pub fn split(command: &str) -> Result<Vec<String>, String> {
    let words = lex(command, false)?;
    Ok(words
        .into_iter()
        .map(|w| w.pieces.concat())
        .collect::<Vec<_>>())
}

/// Parses an allowlist pattern: the same words, where `*` outside quotes is a wildcard and
/// `\` outside quotes makes the next character literal; the program word must be a bare
/// name or an absolute path, without a wildcard.
pub fn parse_pattern(pattern: &str) -> Result<Pattern, String> {
    let mut words = lex(pattern, true)?.into_iter();
    let Some(program) = words.next() else {
        return Err("empty pattern".into());
    };
    let Some(program) = program.literal().map(str::to_owned) else {
        return Err(format!(
            "{pattern:?}: the program may not be a wildcard (that would allow every command)"
        ));
    };
    if program.contains('/') && !program.starts_with('/') {
        return Err(format!(
            "{pattern:?}: the program must be a bare name (found on PATH) or an absolute path; a relative path would run a file in the workspace"
        ));
    }
    let mut args: Vec<PatternWord> = words.collect();
    let rest = args.last().is_some_and(PatternWord::is_star);
    if rest {
        args.pop();
    }
    Ok(Pattern {
        program,
        args,
        rest,
    })
}

/// The words of `text`. `pattern`: an unquoted `*` starts a new piece (a wildcard) and an
/// unquoted `\` quotes the next character; otherwise both are refused like other syntax.
fn lex(text: &str, pattern: bool) -> Result<Vec<PatternWord>, String> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    let mut chars = text.chars();
    // The piece being written of the current word (one is always open once it starts).
    fn piece(cur: &mut Option<Vec<String>>) -> &mut String {
        let pieces = cur.get_or_insert_with(Vec::new);
        if pieces.is_empty() {
            pieces.push(String::new());
        }
        let last = pieces.len() - 1;
        &mut pieces[last]
    }
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(pieces) = cur.take() {
                    out.push(PatternWord { pieces });
                }
            }
            '\'' => {
                let w = piece(&mut cur);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some('\0') => return Err("a NUL byte is not allowed".into()),
                        Some(q) => w.push(q),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                let w = piece(&mut cur);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some(q @ ('$' | '`' | '\\' | '\0')) => {
                            return Err(format!(
                                "shell syntax {q:?} inside double quotes is not allowed under the exec allowlist (commands run without a shell)"
                            ))
                        }
                        Some(q) => w.push(q),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '*' if pattern => {
                piece(&mut cur);
                if let Some(pieces) = cur.as_mut() {
                    pieces.push(String::new());
                }
            }
            '\\' if pattern => match chars.next() {
                Some(q) if !matches!(q, '\n' | '\r' | '\0') => piece(&mut cur).push(q),
                _ => return Err("a `\\` must quote a character of the same line".into()),
            },
            c if SHELL_SYNTAX.contains(&c) => {
                return Err(format!(
                    "shell syntax {c:?} is not allowed under the exec allowlist (commands run without a shell; quote literal text)"
                ))
            }
            c => piece(&mut cur).push(c),
        }
    }
    if let Some(pieces) = cur {
        out.push(PatternWord { pieces });
    }
    Ok(out)
}

/// The allowlist pattern that allows exactly `argv`, every word a literal, if there is one:
/// a program that is a relative path has none, nor a word with a `*`. (A quoted `*` is
/// literal here, but builds before typed words read it as a wildcard, and the pattern is
/// kept in the gateway db; a command with one is allowed once instead.)
pub fn exact_pattern(argv: &[String]) -> Option<String> {
    if argv.iter().any(|w| w.contains('*')) {
        return None;
    }
    let pattern = argv.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
    // Only a pattern that parses back to this very command, every word literal.
    let parsed = parse_pattern(&pattern).ok()?;
    let literal = parsed.args.iter().all(|w| w.literal().is_some()) && !parsed.rest;
    (literal && matches(&parsed, argv)).then_some(pattern)
}

/// `word` as one pattern word that reads back as exactly `word`: bare when it holds only
/// characters with no meaning, else single-quoted (a `'` itself in double quotes, the pieces
/// side by side).
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        return word.to_owned();
    }
    let mut out = String::new();
    for (i, part) in word.split('\'').enumerate() {
        if i > 0 {
            out.push_str("\"'\"");
        }
        if !part.is_empty() || word.is_empty() {
            out.push('\'');
            out.push_str(part);
            out.push('\'');
        }
    }
    out
}

/// Whether `pattern` allows `argv`.
pub fn matches(pattern: &Pattern, argv: &[String]) -> bool {
    let Some((arg0, args)) = argv.split_first() else {
        return false;
    };
    if *arg0 != pattern.program {
        return false;
    }
    let count_ok = if pattern.rest {
        args.len() > pattern.args.len()
    } else {
        args.len() == pattern.args.len()
    };
    count_ok && pattern.args.iter().zip(args).all(|(p, a)| p.matches(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    fn allows(pattern: &str, argv: &[&str]) -> bool {
        matches(&parse_pattern(pattern).unwrap(), &v(argv))
    }

    #[test]
    fn shell_syntax_is_refused_r_e2() {
        for bad in [
            "echo hi; id > f",
            "echo hi && id",
            "echo $(id)",
            "echo `id`",
            "echo hi | sh",
            "echo *",
            "cat < /etc/passwd",
            "echo \"$HOME\"",
            "ls\nid",
            "echo hi #",
            "echo ~",
            "echo 'unterminated",
            "cat a\\*b",
        ] {
            assert!(split(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(
            split("echo 'a; b' \"c d\"  e").unwrap(),
            v(&["echo", "a; b", "c d", "e"])
        );
        assert_eq!(split("  ").unwrap(), Vec::<String>::new());
        assert_eq!(split("x''").unwrap(), v(&["x"]));
        assert_eq!(split("echo '*' \"a*\"").unwrap(), v(&["echo", "*", "a*"]));
    }

    #[test]
    fn patterns_match_words() {
        assert!(allows("echo *", &["echo", "hi"]));
        assert!(allows("echo *", &["echo", "hi", "there"]));
        assert!(!allows("echo *", &["echo"]));
        assert!(!allows("echo *", &["echox", "hi"]));
        assert!(allows("git status", &["git", "status"]));
        assert!(!allows("git status", &["git", "status", "-s"]));
        assert!(allows("cat *.txt", &["cat", "a.txt"]));
        assert!(!allows("cat *.txt", &["cat", "a.txt", "b.txt"]));
        assert!(!allows("cat *.txt", &["cat", "a.md"]));
        assert!(allows("ls", &["ls"]) && !allows("ls", &["ls", "-la"]));
        assert!(parse_pattern("* x").is_err());
        assert!(parse_pattern("ec*ho x").is_err());
        assert!(parse_pattern("./build.sh").is_err());
        assert!(parse_pattern("/usr/bin/ls *").is_ok());
        assert!(parse_pattern("echo hi; id").is_err());
        assert!(parse_pattern("echo a\\").is_err());
    }

    /// Issue 23 item 5: a quoted `*` in a pattern was a wildcard (`echo '*'` allowed
    /// `echo hello world`, `cat 'a*b'` allowed `cat aXXb`). It is the character `*`.
    #[test]
    fn a_quoted_star_is_literal_and_an_unquoted_one_a_wildcard() {
        for quoted in ["echo '*'", "echo \"*\"", "echo \\*"] {
            assert!(allows(quoted, &["echo", "*"]), "{quoted}");
            assert!(!allows(quoted, &["echo", "hello", "world"]), "{quoted}");
            assert!(!allows(quoted, &["echo", "hello"]), "{quoted}");
            let p = parse_pattern(quoted).unwrap();
            assert!(!p.rest() && p.args()[0].literal() == Some("*"), "{quoted}");
        }
        for literal in ["cat 'a*b'", "cat \"a*b\"", "cat a\\*b", "cat 'a'\"*\"b"] {
            assert!(allows(literal, &["cat", "a*b"]), "{literal}");
            assert!(!allows(literal, &["cat", "aXXb"]), "{literal}");
        }
        // Unquoted, it is still a wildcard; mixed, only the unquoted one is.
        assert!(allows("cat a*b", &["cat", "aXXb"]));
        assert!(allows("cat 'a*'*", &["cat", "a*XX"]));
        assert!(!allows("cat 'a*'*", &["cat", "aXX"]));
        assert!(allows("echo '*' *", &["echo", "*", "x", "y"]));
        assert!(!allows("echo '*' *", &["echo", "y", "x"]));
        // A trailing quoted `*` is one literal argument, not "the rest".
        assert!(!allows("ls -l '*'", &["ls", "-l", "a", "b"]));
        assert!(allows("ls -l '*'", &["ls", "-l", "*"]));
        // `**` is a one-argument wildcard, not "the rest".
        assert!(allows("ls **", &["ls", "x"]) && !allows("ls **", &["ls", "x", "y"]));
    }

    #[test]
    fn globs_within_one_word() {
        let w = |p: &str| parse_pattern(&format!("x {p} y")).unwrap().args()[0].clone();
        assert!(w("*.txt").matches("a.txt"));
        assert!(w("a*b*c").matches("axxbyyc"));
        assert!(!w("a*b*c").matches("axxbyy"));
        assert!(w("a*a").matches("aa") && !w("a*a").matches("a"));
        assert!(w("a*").matches("a") && w("*").matches(""));
        assert!(w("é*é").matches("éxé") && !w("é*é").matches("é"));
    }
}

#[cfg(test)]
mod exact_tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    /// The pattern `allow-always` keeps reads back as the command's own words, each a
    /// literal, and allows that command and no other.
    #[test]
    fn an_exact_pattern_allows_that_command_and_no_other() {
        for argv in [
            v(&["ls", "-la"]),
            v(&["echo", "two words", "it's"]),
            v(&["/bin/cat", "a;b"]),
            v(&["echo", "it's \"$x\"", "\\", "''", "'", ""]),
            v(&["grep", "-e", "a?b", "[x]", "~", "#", "!", "$(id)", "`id`"]),
            v(&["echo", "tab\there", "é"]),
        ] {
            let p = exact_pattern(&argv).unwrap_or_else(|| panic!("{argv:?}"));
            let parsed = parse_pattern(&p).unwrap();
            assert!(
                parsed.args().iter().all(|w| w.literal().is_some()) && !parsed.rest(),
                "{p}"
            );
            let words: Vec<&str> = parsed.args().iter().filter_map(|w| w.literal()).collect();
            assert_eq!(
                words,
                argv[1..].iter().map(String::as_str).collect::<Vec<_>>()
            );
            assert!(matches(&parsed, &argv), "{p}");
            let mut other = argv.clone();
            other.push("more".into());
            assert!(!matches(&parsed, &other), "{p}");
            other.pop();
            if let Some(last) = other.last_mut() {
                last.push('x');
            }
            assert!(!matches(&parsed, &other), "{p}");
        }
        assert_eq!(exact_pattern(&v(&["rm", "*"])), None, "a star");
        assert_eq!(exact_pattern(&v(&["cat", "a*b"])), None, "a star");
        assert_eq!(exact_pattern(&v(&["./run.sh"])), None, "a relative program");
        assert_eq!(exact_pattern(&[]), None);
    }
}
