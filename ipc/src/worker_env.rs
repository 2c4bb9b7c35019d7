//! The environment a worker is started with, a contract between the two processes: the
//! supervisor passes exactly the [`PLAIN`] variables it has and nothing else. No secret is
//! ever in a worker's environment (issue 37 item 2: `/proc/<pid>/environ` is readable to its
//! uid until the worker has made itself non-dumpable): provider keys arrive over the link
//! (`AgentSpec::secrets`, `ControlToWorker::Keys`), and the supervisor knows its worker by
//! the link socket's peer credentials, not by a token.

/// Variables every worker inherits when the supervisor has them; none is a secret (proxy
/// variables stay because the HTTP client reads them from the process environment).
pub const PLAIN: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "LOOPGATE_LOG",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

/// Whether a skill's settings may give its commands the variable `name` (R-B6): the
/// operator's `env` and the key as the skill's `primaryEnv` (which a workspace file, so the
/// model, chooses). Refused: what every command's environment has, and what changes how
/// programs are found, loaded, configured or reach the network (loader and interpreter
/// variables, shell start-up files, git and TLS configuration, proxies, editors and pagers
/// that run commands), and the gateway's own.
pub fn skill_may_set(name: &str) -> bool {
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 128;
    if !valid {
        return false;
    }
    let upper = name.to_ascii_uppercase();
    const EXACT: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TMPDIR",
        "TMP",
        "TEMP",
        "LANG",
        "LANGUAGE",
        "TZ",
        "IFS",
        "PWD",
        "OLDPWD",
        "TERM",
        "ENV",
        "BASH_ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "CDPATH",
        "GLOBIGNORE",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "RES_OPTIONS",
        "GCONV_PATH",
        "LOCPATH",
        "NLSPATH",
        "GLIBC_TUNABLES",
        "NODE_OPTIONS",
        "NODE_PATH",
        "CLASSPATH",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "PERLLIB",
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "MANPAGER",
        "LESSOPEN",
        "LESSCLOSE",
        "BROWSER",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CONFIG_DIRS",
        "XDG_RUNTIME_DIR",
        "SSH_AUTH_SOCK",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "DBUS_SESSION_BUS_ADDRESS",
    ];
    const PREFIXES: &[&str] = &[
        "LC_",
        "LD_",
        "DYLD_",
        "BASH_FUNC_",
        "PYTHON",
        "PERL5",
        "RUBY",
        "GEM_",
        "BUNDLE_",
        "GIT_",
        "OPENSSL_",
        "SSL_",
        "NPM_CONFIG_",
        "YARN_",
        "PIP_",
        "CARGO_",
        "RUSTUP_",
        "RUST",
        "GO",
        "MALLOC_",
        "LOOPGATE",
        "OPENCLAW",
        "SYSTEMD_",
        "NOTIFY_SOCKET",
    ];
    !(EXACT.contains(&upper.as_str())
        || PREFIXES.iter().any(|p| upper.starts_with(p))
        || upper.ends_with("_PROXY")
        || PLAIN.iter().any(|p| p.eq_ignore_ascii_case(name)))
}

#[cfg(test)]
mod tests {
    use super::skill_may_set;

    /// R-B6: a skill's variables never change how the commands that get them run.
    #[test]
    fn skills_set_only_their_own_variables() {
        for ok in ["GH_TOKEN", "GH_HOST", "OPENAI_API_KEY", "NOTION_KEY", "_X"] {
            assert!(skill_may_set(ok), "{ok}");
        }
        for no in [
            "PATH",
            "path",
            "LD_PRELOAD",
            "ld_library_path",
            "BASH_ENV",
            "ENV",
            "HOME",
            "GIT_CONFIG_GLOBAL",
            "GIT_SSH_COMMAND",
            "PYTHONPATH",
            "NODE_OPTIONS",
            "OPENSSL_CONF",
            "https_proxy",
            "ALL_PROXY",
            "TMPDIR",
            "LOGNAME",
            "LC_ALL",
            "GCONV_PATH",
            "EDITOR",
            "LOOPGATE_LOG",
            "OPENCLAW_GATEWAY_TOKEN",
            "",
            "1X",
            "A-B",
            "RUSTC_WRAPPER",
            "GOFLAGS",
            "SSL_CERT_FILE",
        ] {
            assert!(!skill_may_set(no), "{no}");
        }
    }
}
