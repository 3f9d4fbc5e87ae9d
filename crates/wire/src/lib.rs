//! The vocabulary virtperf speaks: control-protocol messages, their framing, and the data
//! types that travel in them (workload parameters, per-side measurements, environment
//! fingerprints, final results).
//!
//! Every other crate depends on this one and this one on nothing of ours: it holds no sockets
//! and no kernel knowledge, only types and a codec over any `Read`/`Write`, so the store and
//! the report can use the same types without touching the network.
//!
//! # Framing
//! A frame is a big-endian `u32` payload length followed by that many bytes of JSON encoding
//! one [`Message`]. The reader refuses lengths above a cap before allocating, so a hostile
//! peer cannot make the agent allocate more than [`MAX_CONTROL_FRAME`] bytes.

pub mod frame;
pub mod message;
pub mod model;

pub use frame::{decode_frame, encode, read_message, write_message, WireError, MAX_CONTROL_FRAME};
pub use message::{DriveTarget, Message, PROTOCOL_VERSION};
pub use model::*;

/// TCP port the agent listens on by default for control connections.
pub const DEFAULT_PORT: u16 = 7150;
