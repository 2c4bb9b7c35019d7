//! all
