//! The agent loop: [`core`] decides (sans-IO), [`driver`] carries out its actions, [`prompt`]
//! owns everything the model sees (system prompt and history rendering).

pub mod core;
pub mod driver;
pub mod prompt;
