//! `exec` allowlists: a command is split into words the way a shell would split a simple
//! command with quotes, but anything a shell would interpret (separators, redirections,
//! substitutions, globs, variables, comments, line breaks) is refused, and the words run as
//! an argv with no shell. A pattern matches words, never characters across a word boundary.
//!
//! Pattern words: the first is the program, literally (a bare name found on `PATH`, or an
//! absolute path). Later words match one argument each; a `*` inside a word matches any run
//! of characters within that argument; a last word that is exactly `*` matches one or more
//! remaining arguments.

/// Characters that mean something to a shell outside quotes; a command holding any of them
/// is refused under `allowlist`.
const SHELL_SYNTAX: &[char] = &[
    ';', '&', '|', '<', '>', '(', ')', '$', '`', '\\', '*', '?', '[', ']', '{', '}', '~', '!', '#',
    '\n', '\r', '\0',
];

/// Programs that read instructions from files or arguments the model can write, so allowing
/// them (even with fixed arguments) lets the model run anything: `git` (hooks,
/// `core.fsmonitor`, aliases in `.git/config`), `make`, `npm`, interpreters, `find -exec`,
/// `env`, `xargs`, editors and the like.
pub const UNSAFE_PROGRAMS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "busybox",
    "env",
    "xargs",
    "find",
    "git",
    "make",
    "cmake",
    "ninja",
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "node",
    "deno",
    "bun",
    "python",
    "python3",
    "pip",
    "perl",
    "ruby",
    "php",
    "lua",
    "awk",
    "gawk",
    "sed",
    "tar",
    "zip",
    "vim",
    "vi",
    "nvim",
    "emacs",
    "less",
    "more",
    "man",
    "ssh",
    "scp",
    "rsync",
    "sudo",
    "su",
    "doas",
    "nohup",
    "timeout",
    "nice",
    "setsid",
    "strace",
    "gdb",
    "docker",
    "podman",
    "cargo",
    "go",
    "rustc",
    "gcc",
    "cc",
    "tclsh",
    "expect",
    "watch",
    "script",
    "crontab",
    "at",
    "systemd-run",
];

/// Splits `command` into words (`'...'` is literal; `"..."` is literal but may not hold
/// `$`, `` ` `` or `\`). `Err` names the first shell construct found.
pub fn split(command: &str) -> Result<Vec<String>, String> {
    words(command, false)
}

/// Parses an allowlist pattern: the same words, where `*` is allowed outside quotes; the
/// program word must be a bare name or an absolute path, without `*`.
pub fn parse_pattern(pattern: &str) -> Result<Vec<String>, String> {
    let w = words(pattern, true)?;
    let Some(program) = w.first() else {
        return Err("empty pattern".into());
    };
    if program.contains('*') {
        return Err(format!(
            "{pattern:?}: the program may not be a wildcard (that would allow every command)"
        ));
    }
    if program.contains('/') && !program.starts_with('/') {
        return Err(format!(
            "{pattern:?}: the program must be a bare name (found on PATH) or an absolute path; a relative path would run a file in the workspace"
        ));
    }
    Ok(w)
}

fn words(text: &str, allow_star: bool) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = cur.take() {
                    out.push(w);
                }
            }
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
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
                let w = cur.get_or_insert_with(String::new);
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
            '*' if allow_star => cur.get_or_insert_with(String::new).push('*'),
            c if SHELL_SYNTAX.contains(&c) => {
                return Err(format!(
                    "shell syntax {c:?} is not allowed under the exec allowlist (commands run without a shell; quote literal text)"
                ))
            }
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(w) = cur {
        out.push(w);
    }
    Ok(out)
}

/// The allowlist pattern that allows exactly `argv` (each word literal), if there is one: a
/// word with `*` has none (it would be a wildcard), nor a program that is a relative path.
pub fn exact_pattern(argv: &[String]) -> Option<String> {
    let plain = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    };
    let mut words = Vec::with_capacity(argv.len());
    for w in argv {
        if w.contains('*') {
            return None;
        }
        words.push(if plain(w) {
            w.clone()
        } else if !w.contains('\'') {
            format!("'{w}'")
        } else if !w.contains(['"', '$', '`', '\\']) {
            format!("\"{w}\"")
        } else {
            return None;
        });
    }
    let pattern = words.join(" ");
    // Only a pattern that parses back to this very command.
    let parsed = parse_pattern(&pattern).ok()?;
    (parsed == argv && matches(&parsed, argv)).then_some(pattern)
}

/// Whether the parsed `pattern` allows `argv`.
pub fn matches(pattern: &[String], argv: &[String]) -> bool {
    let (Some(prog), Some(arg0)) = (pattern.first(), argv.first()) else {
        return false;
    };
    if prog != arg0 {
        return false;
    }
    let (pat, args) = (&pattern[1..], &argv[1..]);
    let rest_wild = pat.last().is_some_and(|l| l == "*");
    let fixed = if rest_wild {
        &pat[..pat.len() - 1]
    } else {
        pat
    };
    let count_ok = if rest_wild {
        args.len() > fixed.len()
    } else {
        args.len() == fixed.len()
    };
    count_ok && fixed.iter().zip(args).all(|(p, a)| glob(p, a))
}

/// `*` matches any run of characters within one argument; everything else literally.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == text;
    };
    // Both ends match first, so the slice below falls on character boundaries.
    if text.len() < first.len() + last.len() || !text.starts_with(first) || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `program` (a pattern's first word) is one the model can steer through files or
/// arguments: see [`UNSAFE_PROGRAMS`].
pub fn is_unsafe_program(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    UNSAFE_PROGRAMS.contains(&name)
        || name.starts_with("python")
        || name.starts_with("perl")
        || name.starts_with("ruby")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
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
        ] {
            assert!(split(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(
            split("echo 'a; b' \"c d\"  e").unwrap(),
            v(&["echo", "a; b", "c d", "e"])
        );
        assert_eq!(split("  ").unwrap(), Vec::<String>::new());
        assert_eq!(split("x''").unwrap(), v(&["x"]));
    }

    #[test]
    fn patterns_match_words() {
        let p = parse_pattern("echo *").unwrap();
        assert!(matches(&p, &v(&["echo", "hi"])));
        assert!(matches(&p, &v(&["echo", "hi", "there"])));
        assert!(!matches(&p, &v(&["echo"])));
        assert!(!matches(&p, &v(&["echox", "hi"])));
        let p = parse_pattern("git status").unwrap();
        assert!(matches(&p, &v(&["git", "status"])));
        assert!(!matches(&p, &v(&["git", "status", "-s"])));
        let p = parse_pattern("cat *.txt").unwrap();
        assert!(matches(&p, &v(&["cat", "a.txt"])));
        assert!(!matches(&p, &v(&["cat", "a.txt", "b.txt"])));
        assert!(!matches(&p, &v(&["cat", "a.md"])));
        let p = parse_pattern("ls").unwrap();
        assert!(matches(&p, &v(&["ls"])) && !matches(&p, &v(&["ls", "-la"])));
        assert!(parse_pattern("* x").is_err());
        assert!(parse_pattern("./build.sh").is_err());
        assert!(parse_pattern("/usr/bin/ls *").is_ok());
        assert!(parse_pattern("echo hi; id").is_err());
    }

    #[test]
    fn globs_within_one_word() {
        assert!(glob("*.txt", "a.txt"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxbyy"));
        assert!(glob("a*a", "aa") && !glob("a*a", "a"));
        assert!(glob("*", "anything"));
    }

    #[test]
    fn unsafe_programs() {
        assert!(is_unsafe_program("git") && is_unsafe_program("/usr/bin/python3.11"));
        assert!(!is_unsafe_program("ls") && !is_unsafe_program("echo"));
    }
}

#[cfg(test)]
mod exact_tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn an_exact_pattern_allows_that_command_and_no_other() {
        for argv in [
            v(&["ls", "-la"]),
            v(&["echo", "two words", "it's"]),
            v(&["/bin/cat", "a;b"]),
        ] {
            let p = exact_pattern(&argv).unwrap();
            let parsed = parse_pattern(&p).unwrap();
            assert!(matches(&parsed, &argv), "{p}");
            let mut other = argv.clone();
            other.push("more".into());
            assert!(!matches(&parsed, &other), "{p}");
        }
        assert_eq!(exact_pattern(&v(&["rm", "*"])), None, "a wildcard");
        assert_eq!(exact_pattern(&v(&["./run.sh"])), None, "a relative program");
        assert_eq!(exact_pattern(&v(&["echo", "it's \"$x\""])), None);
    }
}
