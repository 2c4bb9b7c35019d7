//! The agent loop: [`core`] decides (sans-IO), [`driver`] carries out its actions, [`prompt`]
//! owns everything the model sees (system prompt and history rendering), [`reply`] shapes what
//! the user gets (silent token, tool-error warning), [`blocks`] cuts it into blocks (R-D5),
//! [`notes`] adds what follows it (the usage footer, the raw trace).

pub mod blocks;
pub mod compact_now;
pub mod compaction;
pub mod core;
pub mod driver;
pub mod notes;
pub mod prompt;
pub mod reply;
pub mod retry;
pub mod skills;
pub mod verbose;
pub mod xml;
