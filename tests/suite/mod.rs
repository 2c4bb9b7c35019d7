mod chaos;
mod foundation;
mod frames;
mod idempotency;
mod lanes;
mod operations;
mod turn;
mod websocket;
