//! The Redis serialization protocol: the request parser and the reply encoder.

pub mod parser;
pub mod reply;

pub use parser::{ParserLimits, ProtocolError, RequestParser};
pub use reply::{Protocol, Reply, ReplyBuf};
