//! HTTP plumbing every feature stands on: listeners and their guard (limits,
//! keys, tenants, hosts, TLS), body reading, ingest rates, work off the async
//! workers, asking the other nodes of a sharded log, and the one error type
//! whose kinds map to their statuses in one place ([`error`]).

pub mod auth;
pub mod body;
pub mod error;
pub mod fanout;
pub mod prometheus;
pub mod query;
pub mod rate;
pub mod reload;
pub mod server;
pub mod tls;

pub use error::{ApiError, ApiResult, ErrorKind};
pub use server::off_worker;
