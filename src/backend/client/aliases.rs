//! The names the client's signatures share: a server's address and one
//! reply of a pipeline, so that every room says the same thing the same way.

use std::sync::Arc;

use redis::Value;

use crate::backend::error::CommandError;

/// `host:port` of one server.
pub(crate) type NodeAddr = Arc<str>;

/// One reply of a pipeline.
pub(crate) type Reply = Result<Value, CommandError>;
