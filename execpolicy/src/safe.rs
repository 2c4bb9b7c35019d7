//! Which commands may be allowed for good (`allow-always`): only programs on an explicit
//! safe list, ones that read and print and cannot run a file the model writes or code it
//! chooses. Anything not on it (interpreters, package managers, build tools, compilers,
//! test runners, version control, editors, `sed`, `awk`, `xargs`, ...) is refused, so a
//! program nobody thought of is refused too. Wrappers that only adjust how a program runs
//! (`env`, `nice`, `timeout`, ...) are looked through to the program they run; a wrapper
//! option this module does not know means the command is refused. A program given as a
//! path (`./x`, `/tmp/x`) is never safe: the model may have written it.
//!
//! The same check warns about config allowlist patterns ([`check_pattern`]), where a
//! wildcard word stands for any text.

/// Programs that may be allowed for good, with any arguments: they read files and print, and
/// take no instruction from a file that could make them run another program.
const SAFE: &[&str] = &[
    "b2sum",
    "basename",
    "cat",
    "cksum",
    "cmp",
    "comm",
    "cut",
    "date",
    "df",
    "diff",
    "dirname",
    "du",
    "echo",
    "egrep",
    "expand",
    "false",
    "fgrep",
    "file",
    "fold",
    "grep",
    "head",
    "id",
    "ls",
    "md5sum",
    "nl",
    "nproc",
    "od",
    "paste",
    "printenv",
    "printf",
    "pwd",
    "readlink",
    "realpath",
    "seq",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "sleep",
    "stat",
    "tac",
    "tail",
    "tr",
    "true",
    "uname",
    "unexpand",
    "uniq",
    "uptime",
    "wc",
    "whoami",
];

/// Programs that are safe only without some arguments (each a whole word, or a long
/// option's name): `find` runs programs and deletes or writes files through its actions,
/// `sort` runs its `--compress-program`, `rg` runs its `--pre` preprocessor and
/// `--hostname-bin`.
const SAFE_WITHOUT: &[(&str, &[&str])] = &[
    (
        "find",
        &[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ],
    ),
    ("sort", &["--compress-program"]),
    ("rg", &["--pre", "--pre-glob", "--hostname-bin"]),
];

/// Programs that only adjust how the program after them runs, and their options (GNU
/// coreutils and util-linux; each stops at its first operand, as here).
const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        name: "env",
        flags: &[
            "-i",
            "--ignore-environment",
            "-0",
            "--null",
            "-v",
            "--debug",
            "-",
        ],
        valued: &["-u", "--unset", "-C", "--chdir"],
        operands: 0,
    },
    Wrapper {
        name: "nice",
        flags: &[],
        valued: &["-n", "--adjustment"],
        operands: 0,
    },
    Wrapper {
        name: "ionice",
        flags: &["-t", "--ignore"],
        valued: &["-c", "--class", "-n", "--classdata"],
        operands: 0,
    },
    Wrapper {
        name: "timeout",
        flags: &["--preserve-status", "--foreground", "-v", "--verbose"],
        valued: &["-s", "--signal", "-k", "--kill-after"],
        operands: 1,
    },
    Wrapper {
        name: "stdbuf",
        flags: &[],
        valued: &["-i", "--input", "-o", "--output", "-e", "--error"],
        operands: 0,
    },
    Wrapper {
        name: "taskset",
        flags: &["-a", "--all-tasks", "-c", "--cpu-list"],
        valued: &[],
        operands: 1,
    },
    Wrapper {
        name: "nohup",
        flags: &[],
        valued: &[],
        operands: 0,
    },
    Wrapper {
        name: "setsid",
        flags: &["-c", "--ctty", "-f", "--fork", "-w", "--wait"],
        valued: &[],
        operands: 0,
    },
    Wrapper {
        name: "time",
        flags: &[
            "-p",
            "--portability",
            "-a",
            "--append",
            "-v",
            "--verbose",
            "-q",
            "--quiet",
        ],
        valued: &["-f", "--format", "-o", "--output"],
        operands: 0,
    },
    Wrapper {
        name: "chrt",
        flags: &[
            "-a",
            "--all-tasks",
            "-b",
            "--batch",
            "-d",
            "--deadline",
            "-f",
            "--fifo",
            "-i",
            "--idle",
            "-o",
            "--other",
            "-r",
            "--rr",
            "-R",
            "--reset-on-fork",
            "-v",
            "--verbose",
        ],
        valued: &[
            "-T",
            "--sched-runtime",
            "-P",
            "--sched-period",
            "-D",
            "--sched-deadline",
        ],
        operands: 1,
    },
    Wrapper {
        name: "command",
        flags: &["-p"],
        valued: &[],
        operands: 0,
    },
    Wrapper {
        name: "exec",
        flags: &["-c", "-l"],
        valued: &["-a"],
        operands: 0,
    },
];

/// Wrappers inside wrappers looked through at most.
const MAX_DEPTH: usize = 8;

/// Variables `env NAME=value` may set: the locale and display ones, with a value that names
/// no file (no `/`). Others (`PATH`, `LD_PRELOAD`, a program's config path...) could make a
/// safe program run something else.
const ENV_NAMES: &[&str] = &["LANG", "LANGUAGE", "TZ", "NO_COLOR", "COLUMNS", "LINES"];

struct Wrapper {
    name: &'static str,
    /// Options without an argument: `-t`, `--ignore` (short ones may be bundled: `-tv`).
    flags: &'static [&'static str],
    /// Options with one: `-n 5`, `-n5`, `--adjustment=5`, `--adjustment 5`.
    valued: &'static [&'static str],
    /// Operands before the program: `timeout`'s duration, `taskset`'s mask, `chrt`'s
    /// priority.
    operands: usize,
}

/// One word as the check sees it: its text, or `None` for a pattern's wildcard (any text).
type Word<'a> = Option<&'a str>;

/// Whether `argv` may be allowed for good; `Err` says why not.
pub fn check_argv(argv: &[String]) -> Result<(), String> {
    let words: Vec<Word> = argv.iter().map(|w| Some(w.as_str())).collect();
    check(&words, false)
}

/// Whether every command `pattern` allows runs a program on the safe list; `Err` says why
/// not (for a config warning).
pub fn check_pattern(pattern: &crate::argv::Pattern) -> Result<(), String> {
    let mut words: Vec<Word> = vec![Some(pattern.program())];
    words.extend(pattern.args().iter().map(|w| w.literal()));
    check(&words, pattern.rest())
}

/// `open`: more words of any text may follow `words`.
fn check(words: &[Word], open: bool) -> Result<(), String> {
    let mut at = words;
    for _ in 0..MAX_DEPTH {
        let program = match at.first() {
            Some(Some(p)) => *p,
            Some(None) => return Err("a wildcard stands where the program would be".into()),
            None if open => return Err("a wildcard stands where the program would be".into()),
            None => return Err("there is no program".into()),
        };
        if program.contains('/') {
            return Err(format!(
                "{program:?} is a path: the model may have written that file"
            ));
        }
        let args = &at[1..];
        if let Some(w) = WRAPPERS.iter().find(|w| w.name == program) {
            let inner = w.program_words(args)?;
            if inner.is_empty() && !open && program == "env" {
                // `env` alone prints the environment.
                return Ok(());
            }
            at = inner;
            continue;
        }
        return safe_program(program, args, open);
    }
    Err("too many wrappers".into())
}

fn safe_program(program: &str, args: &[Word], open: bool) -> Result<(), String> {
    if SAFE.contains(&program) {
        return Ok(());
    }
    let Some((_, without)) = SAFE_WITHOUT.iter().find(|(p, _)| *p == program) else {
        return Err(format!(
            "{program:?} is not on the exec safe list (programs that cannot run files the model writes)"
        ));
    };
    if open || args.iter().any(Option::is_none) {
        return Err(format!(
            "{program:?} is safe only without some arguments, and a wildcard could be one"
        ));
    }
    for arg in args.iter().flatten() {
        if let Some(bad) = without.iter().find(|b| forbids(b, arg)) {
            return Err(format!(
                "{program:?} with {bad} runs or writes what its arguments name"
            ));
        }
    }
    Ok(())
}

/// Whether `arg` is the forbidden `bad`: the word itself, or a long option's name, with a
/// value or abbreviated (GNU `getopt_long` takes any unambiguous prefix: `--compress-p`).
fn forbids(bad: &str, arg: &str) -> bool {
    if !bad.starts_with("--") {
        return arg == bad;
    }
    let name = arg.split('=').next().unwrap_or(arg);
    name.len() > 2 && name.starts_with("--") && bad.starts_with(name)
}

impl Wrapper {
    /// The words of the program this wrapper runs, after its options, `env`'s assignments
    /// and its operands; `Err` for an option it does not know (or one that runs no program,
    /// such as `taskset -p`).
    fn program_words<'w, 'a>(&self, args: &'w [Word<'a>]) -> Result<&'w [Word<'a>], String> {
        let name = self.name;
        let unknown = |w: &str| {
            Err(format!(
                "{name} {w:?} is an option this check does not know"
            ))
        };
        let mut i = 0;
        // Options, up to the first word that is not one.
        while let Some(word) = args.get(i) {
            let Some(word) = *word else {
                return Err(format!("a wildcard stands where {name}'s options are"));
            };
            if word == "--" {
                i += 1;
                break;
            }
            if self.flags.contains(&word) {
                i += 1;
                continue;
            }
            if let Some(long) = word.strip_prefix("--") {
                let (opt, value) = match long.split_once('=') {
                    Some((o, v)) => (o, Some(v)),
                    None => (long, None),
                };
                let opt = format!("--{opt}");
                if !self.valued.contains(&opt.as_str()) {
                    return unknown(word);
                }
                i += if value.is_some() { 1 } else { 2 };
                continue;
            }
            if word.len() > 1 && word.starts_with('-') {
                if name == "nice" && word[1..].chars().all(|c| c.is_ascii_digit()) {
                    i += 1; // `nice -10`: the old form of `-n 10`.
                    continue;
                }
                i += self.short_options(word).ok_or_else(|| {
                    format!("{name} {word:?} is an option this check does not know")
                })?;
                continue;
            }
            break;
        }
        if name == "env" {
            while let Some(Some(word)) = args.get(i) {
                let Some((var, value)) = word.split_once('=') else {
                    break;
                };
                if !settable(var, value) {
                    return Err(format!(
                        "env may set only the locale and display variables, with no path (not {var})"
                    ));
                }
                i += 1;
            }
        }
        i += self.operands;
        // `i` past the end: a valued option or an operand is missing.
        if i > args.len() || (self.operands > 0 && i == args.len()) {
            return Err(format!("{name} runs no program here"));
        }
        Ok(&args[i..])
    }

    /// How many words a bundle of short options takes (`-tv`: 1, `-c 3`: 2, `-c3`: 1), or
    /// `None` for one this wrapper does not have.
    fn short_options(&self, word: &str) -> Option<usize> {
        for (at, c) in word.char_indices().skip(1) {
            let opt = format!("-{c}");
            if self.flags.contains(&opt.as_str()) {
                continue;
            }
            if self.valued.contains(&opt.as_str()) {
                let attached = at + c.len_utf8() < word.len();
                return Some(if attached { 1 } else { 2 });
            }
            return None;
        }
        Some(1)
    }
}

fn settable(var: &str, value: &str) -> bool {
    let known = ENV_NAMES.contains(&var)
        || var
            .strip_prefix("LC_")
            .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_uppercase()));
    known
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:@+-,".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(command: &str) -> Vec<String> {
        crate::argv::split(command).unwrap()
    }

    fn safe(command: &str) -> bool {
        check_argv(&argv(command)).is_ok()
    }

    /// Issue 23 item 5: allow-always was withheld only for a deny-list of argv[0]'s
    /// basename, so it was offered for each of these.
    #[test]
    fn the_reported_bypasses_are_refused() {
        for command in [
            "stdbuf -o0 python3 build.py",
            "ionice -c3 bash run.sh",
            "pip3 install requests",
            "nodejs app.js",
            "pytest",
            "clang -fplugin=./p.so x.c",
        ] {
            assert!(!safe(command), "{command:?} was offered allow-always");
        }
    }

    #[test]
    fn programs_off_the_list_are_refused() {
        for program in [
            "python",
            "python3",
            "python3.12",
            "node",
            "nodejs",
            "deno",
            "bun",
            "bash",
            "sh",
            "dash",
            "zsh",
            "fish",
            "busybox",
            "perl",
            "ruby",
            "php",
            "lua",
            "tclsh",
            "Rscript",
            "java",
            "pip",
            "pip3",
            "uv",
            "npm",
            "npx",
            "yarn",
            "pnpm",
            "cargo",
            "go",
            "make",
            "cmake",
            "ninja",
            "gradle",
            "mvn",
            "gcc",
            "cc",
            "clang",
            "rustc",
            "ld",
            "pytest",
            "tox",
            "jest",
            "git",
            "hg",
            "svn",
            "sed",
            "awk",
            "gawk",
            "xargs",
            "tar",
            "zip",
            "unzip",
            "vim",
            "emacs",
            "less",
            "more",
            "man",
            "ssh",
            "scp",
            "rsync",
            "curl",
            "wget",
            "sudo",
            "su",
            "doas",
            "docker",
            "strace",
            "gdb",
            "watch",
            "flock",
            "unshare",
            "nsenter",
            "chroot",
            "prlimit",
            "systemd-run",
            "sdiff",
            "diff3",
            "jq",
            "cp",
            "mv",
            "rm",
            "tee",
            "dd",
            "install",
            "ln",
            "chmod",
        ] {
            assert!(!safe(program), "{program}");
            assert!(!safe(&format!("{program} x")), "{program} x");
        }
    }

    #[test]
    fn safe_programs_with_any_arguments() {
        for command in [
            "ls -la src",
            "cat a.txt",
            "head -n 5 f",
            "tail -f log",
            "wc -l f",
            "grep -rn 'fn main' .",
            "rg -n TODO",
            "find . -name '*.rs' -type f",
            "sort -u f",
            "date",
            "echo hello world",
            "pwd",
            "whoami",
            "uname -a",
            "diff -u a b",
            "sha256sum f",
            "stat f",
            "du -sh .",
            "df -h",
            "true",
        ] {
            assert!(safe(command), "{command}: {:?}", check_argv(&argv(command)));
        }
    }

    #[test]
    fn a_path_is_never_safe() {
        for command in [
            "./x",
            "/tmp/x",
            "/bin/ls",
            "bin/cat f",
            "timeout 5 ./ls",
            "env /bin/ls",
        ] {
            assert!(!safe(command), "{command}");
        }
    }

    #[test]
    fn arguments_that_run_or_write_are_refused() {
        for command in [
            "find . -exec ./x '{}' ';'",
            "find . -execdir sh -c id ';'",
            "find . -ok rm '{}' ';'",
            "find . -okdir rm '{}' ';'",
            "find . -delete",
            "find . -fprint out",
            "find . -fprintf out %p",
            "find . -fls out",
            "sort --compress-program=./x f",
            "sort --compress-program ./x f",
            "sort --compress-p=./x f",
            "sort --com=./x f",
            "rg --pre ./x TODO",
            "rg --pre=./x TODO",
            "rg --hostname-bin=./x TODO",
            "timeout 5 find . -delete",
        ] {
            assert!(!safe(command), "{command}");
        }
        assert!(safe("sort --check f") && safe("find . -newer x -print"));
    }

    #[test]
    fn wrappers_are_looked_through() {
        for command in [
            "env ls",
            "env",
            "env -i ls",
            "env - ls",
            "env -u HOME ls",
            "env -uHOME ls",
            "env --unset=HOME ls",
            "env -C sub ls",
            "env --chdir=sub ls",
            "env LANG=C LC_ALL=C.UTF-8 TZ=UTC sort f",
            "env -- ls",
            "nice ls",
            "nice -n 5 ls",
            "nice -n5 ls",
            "nice -5 ls",
            "nice --adjustment=5 ls",
            "ionice -c3 ls",
            "ionice -c 2 -n 7 ls",
            "ionice --class=3 -t ls",
            "timeout 5 ls",
            "timeout -s KILL 5 ls",
            "timeout -sKILL -k 2 5s ls",
            "timeout --signal=TERM --kill-after=1 5 ls",
            "timeout --preserve-status --foreground 5 ls",
            "taskset -c 0 ls",
            "taskset 0x1 ls",
            "taskset -a -c 0-3 ls",
            "stdbuf -o0 grep x f",
            "stdbuf -oL -eL --input=0 cat f",
            "nohup ls",
            "setsid -f ls",
            "time -f %e ls",
            "time -p ls",
            "chrt -f 10 ls",
            "chrt 0 ls",
            "command ls",
            "exec -a name ls",
            "nice -n 5 timeout 5 env LANG=C stdbuf -o0 grep -r x .",
        ] {
            assert!(safe(command), "{command}: {:?}", check_argv(&argv(command)));
        }
    }

    #[test]
    fn wrappers_of_unsafe_programs_or_unknown_options_are_refused() {
        for command in [
            "env python3 x.py",
            "env LD_PRELOAD=./x.so ls",
            "env PATH=. ls",
            "env PATH=/tmp ls",
            "env RIPGREP_CONFIG_PATH=./rc rg x",
            "env LANG=../../tmp/x ls",
            "env TZ=/tmp/zone date",
            "env -S 'python3 x.py'",
            "env --split-string=ls",
            "env --ch=sub ls",
            "env -u",
            "nice",
            "nice -n",
            "nice -n 5 bash x",
            "nice --5 ls",
            "ionice -p 1",
            "ionice -P 1",
            "ionice -u 1",
            "ionice -c3 bash run.sh",
            "timeout 5",
            "timeout -s KILL",
            "timeout -x 5 ls",
            "timeout 5 sh -c id",
            "taskset -p 1",
            "taskset 0x1",
            "taskset -c 0 make",
            "stdbuf -o0 python3 build.py",
            "stdbuf -x ls",
            "nohup ./x",
            "nohup --help",
            "setsid bash",
            "time -o t make",
            "chrt -p 10 1",
            "chrt -m",
            "command -v ls",
            "exec ./x",
            "xargs ls",
            "xargs -0 cat",
            "sudo ls",
            "nice nice nice nice nice nice nice nice nice ls",
        ] {
            assert!(!safe(command), "{command}");
        }
    }

    /// Config patterns: a wildcard stands for any text, so it may not stand where a program
    /// or a wrapper's option would be, nor among the arguments of a program safe only
    /// without some.
    #[test]
    fn patterns_are_checked_with_their_wildcards() {
        let check = |p: &str| check_pattern(&crate::argv::parse_pattern(p).unwrap()).is_ok();
        for ok in [
            "ls *",
            "cat *.txt",
            "echo listed *",
            "timeout 5 ls *",
            "env ls *",
            "grep -r * .",
        ] {
            assert!(check(ok), "{ok}");
        }
        for bad in [
            "git status",
            "timeout 5 *",
            "timeout * ls",
            "env *",
            "nice *",
            "find *",
            "find . -name *",
            "sort *",
            "rg * x",
            "python3 x.py",
            "/bin/ls *",
        ] {
            assert!(!check(bad), "{bad}");
        }
        assert!(check("find . -name '*.rs'") && check("ls '*'"));
    }
}
