//! The integration suite: one test binary (house style rule 34). Each test starts the real
//! binaries in its own temp state dir and talks over the real sockets; only the model is
//! faked, at the wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
