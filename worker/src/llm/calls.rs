//! Tool calls as they stream in, whichever API sends them: started with an id and a name,
//! arguments in pieces (or whole), keyed by the API's own position for the call (a choice's
//! `index`, a Responses `output_index`, an Anthropic content block `index`). Only a complete
//! response hands them out ([`Calls::finish`]); a response cut short runs none of them.

use super::{LlmError, LlmEvent};
use crate::tools::ToolCall;

/// Most tool calls one response may hold.
pub const MAX_CALLS: usize = 128;

#[derive(Debug)]
struct Slot {
    key: u64,
    id: String,
    name: String,
    args: String,
}

/// The tool calls of one response.
#[derive(Debug)]
pub struct Calls {
    slots: Vec<Slot>,
    /// Largest arguments of one call, in bytes.
    max_args: usize,
}

impl Calls {
    pub fn new(max_args: usize) -> Self {
        Self {
            slots: Vec::new(),
            max_args,
        }
    }

    fn slot(&mut self, key: u64) -> Result<(usize, &mut Slot), LlmError> {
        if let Some(i) = self.slots.iter().position(|s| s.key == key) {
            return Ok((i, &mut self.slots[i]));
        }
        if self.slots.len() >= MAX_CALLS {
            return Err(LlmError::Protocol(format!(
                "the response holds more than {MAX_CALLS} tool calls"
            )));
        }
        self.slots.push(Slot {
            key,
            id: String::new(),
            name: String::new(),
            args: String::new(),
        });
        let i = self.slots.len() - 1;
        Ok((i, &mut self.slots[i]))
    }

    /// A call at `key` begins (or gains its id and name); its progress event.
    pub fn start(&mut self, key: u64, id: &str, name: &str) -> Result<LlmEvent, LlmError> {
        let (index, slot) = self.slot(key)?;
        if !id.is_empty() {
            slot.id = id.to_owned();
        }
        slot.name.push_str(name);
        Ok(LlmEvent::ToolCallStart {
            index,
            name: slot.name.clone(),
        })
    }

    /// More of the arguments of the call at `key`; its progress event.
    pub fn push_args(&mut self, key: u64, piece: &str) -> Result<LlmEvent, LlmError> {
        let max = self.max_args;
        let (index, slot) = self.slot(key)?;
        if slot.args.len() + piece.len() > max {
            return Err(LlmError::Protocol(format!(
                "tool call {index} has arguments longer than {max} bytes"
            )));
        }
        slot.args.push_str(piece);
        Ok(LlmEvent::ToolCallDelta {
            index,
            bytes: piece.len(),
        })
    }

    /// The whole arguments of the call at `key` (an API that repeats them at the end: they
    /// replace the pieces).
    pub fn set_args(&mut self, key: u64, all: &str) -> Result<(), LlmError> {
        let max = self.max_args;
        let (index, slot) = self.slot(key)?;
        if all.len() > max {
            return Err(LlmError::Protocol(format!(
                "tool call {index} has arguments longer than {max} bytes"
            )));
        }
        all.clone_into(&mut slot.args);
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The complete calls, in order: unnamed ones dropped, missing ids filled in, empty
    /// arguments as `{}`.
    pub fn finish(self) -> Vec<ToolCall> {
        self.slots
            .into_iter()
            .enumerate()
            .filter(|(_, s)| !s.name.is_empty())
            .map(|(i, s)| ToolCall {
                id: if s.id.is_empty() {
                    format!("call_{i}")
                } else {
                    s.id
                },
                name: s.name,
                arguments: if s.args.trim().is_empty() {
                    "{}".into()
                } else {
                    s.args
                },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_assemble_by_key_and_stay_bounded() {
        let mut c = Calls::new(10);
        c.start(7, "a", "read").unwrap();
        c.push_args(7, "{\"p\":").unwrap();
        c.start(2, "", "ls").unwrap();
        c.push_args(7, "1}").unwrap();
        assert!(c.push_args(2, &"x".repeat(11)).is_err());
        let calls = c.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].arguments.as_str()),
            ("a", "{\"p\":1}")
        );
        assert_eq!(
            (calls[1].id.as_str(), calls[1].arguments.as_str()),
            ("call_1", "{}")
        );
        let mut many = Calls::new(10);
        for k in 0..MAX_CALLS as u64 {
            many.start(k, "", "t").unwrap();
        }
        assert!(many.start(999, "", "t").is_err());
    }
}
