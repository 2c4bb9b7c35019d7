mod foundation;
mod frames;
mod idempotency;
mod turn;
