//! A request on its way from the connection to its handler: its id, method and params
//! text, and its share of the parse budgets (`connection::budget`) until the handler has
//! read its params.

use std::sync::{Arc, Mutex};

use ipc::gateway::RequestFrame;
use serde_json::value::RawValue;

use crate::connection::budget::Charge;

pub use crate::connection::budget::INLINE_PARSE_BYTES;

/// A request as its handler gets it.
pub struct Request {
    pub id: String,
    /// The method's name as sent.
    pub method: String,
    /// The params' text, parsed by the handler into its method's params type.
    pub params: Option<Arc<RawValue>>,
    charge: Mutex<Option<Charge>>,
}

impl Request {
    pub fn new(frame: RequestFrame, charge: Option<Charge>) -> Self {
        Self {
            id: frame.id,
            method: frame.method,
            params: frame.params.map(Arc::from),
            charge: Mutex::new(charge),
        }
    }

    /// The params were read: the frame's share of the budgets goes back (the rest of it is
    /// given back when the request is dropped, for handlers that read no params).
    pub fn parsed(&self) {
        if let Ok(mut c) = self.charge.lock() {
            c.take();
        }
    }
}
