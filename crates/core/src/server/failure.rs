//! How a failure of the redis crate reads in our errors.

use redis::{ErrorKind, RedisError};

/// What `e` means for the user: the server could not be reached, or the connection to it was lost (with the
/// operating system's reason), or it refused the credentials; otherwise the server's own error for a command.
pub(crate) fn describe(e: &RedisError) -> String {
    if e.kind() == ErrorKind::AuthenticationFailed {
        // The redis crate keeps no more of the server's answer to AUTH than that it refused it.
        return "the server refused the credentials (a wrong password, or a user that does not exist or is disabled)"
            .to_owned();
    }
    if e.is_connection_refusal() {
        return format!("cannot connect: {e}");
    }
    if e.is_io_error() || e.is_connection_dropped() {
        return format!("connection failed: {e}");
    }
    e.to_string()
}
