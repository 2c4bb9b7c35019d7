//! Protocol versions of the supervisor <-> worker link.
//!
//! Rules (also in `docs/protocol.md`): bump [`PROTOCOL_VERSION`] only for incompatible
//! changes; additive changes (new optional fields, new variants that older peers decode as
//! `Unknown`) keep the version. Every variant documents the version it appeared in.

/// The control-link protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 2;
/// The oldest control-link protocol version this build still accepts.
pub const MIN_PROTOCOL_VERSION: u32 = 2;
/// The build string exchanged in the handshake.
pub const BUILD: &str = env!("CARGO_PKG_VERSION");

/// Picks the protocol version two peers share, if any: the highest version inside both
/// `[min, max]` ranges.
pub fn negotiate(peer_min: u32, peer_max: u32) -> Option<u32> {
    let hi = peer_max.min(PROTOCOL_VERSION);
    let lo = peer_min.max(MIN_PROTOCOL_VERSION);
    (lo <= hi).then_some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiate_picks_highest_common_version() {
        assert_eq!(
            negotiate(1, 1),
            None,
            "v1 peers are refused (v2 changed session answers)"
        );
        assert_eq!(negotiate(1, 2), Some(2));
        assert_eq!(negotiate(1, 9), Some(PROTOCOL_VERSION));
        assert_eq!(negotiate(PROTOCOL_VERSION + 1, PROTOCOL_VERSION + 3), None);
        assert_eq!(negotiate(0, 0), None);
    }
}
