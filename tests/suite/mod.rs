mod foundation;
mod frames;
mod idempotency;
mod lanes;
mod turn;
mod websocket;
