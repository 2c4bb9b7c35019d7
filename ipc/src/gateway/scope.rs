//! Operator scopes: what a connection may do. Clients name them as strings (OpenClaw's), and
//! may name others; the ones the gateway checks are [`Scope`]s, with one rule of coverage.

/// A scope a method or an event needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Everything.
    Admin,
    Read,
    /// Implies read.
    Write,
    /// Device pairing and tokens.
    Pairing,
    /// Exec approvals: listed, decided, announced.
    Approvals,
}

/// Choosing the model a session or a run uses is an admin's call on every path that can do
/// it: `agent` with `provider`/`model`, `sessions.patch` with `model`, the `/model <model>`
/// command, `/new <model>` (as OpenClaw's `agent` decides it by its params). A request that
/// would change the model needs this scope whatever its method's own.
pub const MODEL_CHANGE: Scope = Scope::Admin;

impl Scope {
    /// The scope a request of a method needing `self` needs, when it `changes_model` or not:
    /// the one rule every path asks ([`MODEL_CHANGE`]).
    pub const fn with_model_change(self, changes_model: bool) -> Scope {
        if changes_model {
            MODEL_CHANGE
        } else {
            self
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Admin => "operator.admin",
            Scope::Read => "operator.read",
            Scope::Write => "operator.write",
            Scope::Pairing => "operator.pairing",
            Scope::Approvals => "operator.approvals",
        }
    }

    /// Whether one granted scope (as a client named it) covers `self`: admin covers all,
    /// write covers read.
    pub fn granted_by(self, granted: &str) -> bool {
        granted == Scope::Admin.as_str()
            || granted == self.as_str()
            || (granted == Scope::Write.as_str() && self == Scope::Read)
    }

    /// Whether any of `granted` covers `self`.
    pub fn held_in<S: AsRef<str>>(self, granted: &[S]) -> bool {
        granted.iter().any(|g| self.granted_by(g.as_ref()))
    }
}

/// Whether `granted` covers every scope named in `wanted` (names the gateway does not check
/// are covered only by themselves or admin).
pub fn covers<S: AsRef<str>, W: AsRef<str>>(granted: &[S], wanted: &[W]) -> bool {
    wanted.iter().all(|w| {
        let w = w.as_ref();
        granted.iter().any(|g| {
            let g = g.as_ref();
            g == w
                || g == Scope::Admin.as_str()
                || (g == Scope::Write.as_str() && w == Scope::Read.as_str())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_covers_all_and_write_covers_read() {
        assert!(Scope::Read.held_in(&["operator.write"]));
        assert!(!Scope::Write.held_in(&["operator.read"]));
        assert!(Scope::Pairing.held_in(&["operator.admin"]));
        assert!(!Scope::Approvals.held_in(&["operator.write", "operator.read"]));
        assert!(covers(
            &["operator.write"],
            &["operator.read", "operator.write"]
        ));
        assert!(covers(&["operator.admin"], &["x.custom"]));
        assert!(!covers(&["operator.write"], &["x.custom"]));
    }
}
