//! The few pieces of the Redis protocol (RESP2) a caller needs to carry our commands on a socket of its own (see
//! direct/): commands written out, and replies read back.
//!
//! Ours rather than the redis crate's (`Cmd` packing, `ValueCodec`), which allocate per command and per reply value:
//! with the crate's, the direct connection ran over 10% slower (the measurement:
//! bench/results/2026-11-25-resp-vs-redis-crate-interleaved.md). It is fuzzed instead: property tests
//! (tests/fuzz_resp.rs) and cargo-fuzz targets (fuzz/), both run by `npm run fuzz`.

/// One reply, as far as our commands need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// An integer reply.
    Int(i64),
    /// A status reply (`+OK`).
    Status(String),
    /// An error reply, its text.
    Error(String),
    /// An array reply, its elements.
    Array(Vec<Reply>),
    /// A nil reply (bulk or array).
    Nil,
    /// A bulk string, its bytes skipped.
    Other,
}

impl Reply {
    /// The replies of the `count` calls one command answered for: when several, an array's elements if it has
    /// `count` of them, else this reply for each (an error, say, that stopped the whole command).
    pub fn into_parts(self, count: usize) -> Vec<Reply> {
        match self {
            Reply::Array(parts) if count > 1 && parts.len() == count => parts,
            reply if count == 1 => vec![reply],
            reply => vec![reply; count],
        }
    }
}

/// The bytes could not be a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

/// Appends the command `args` in RESP.
pub fn encode<A: AsRef<[u8]>>(buf: &mut Vec<u8>, args: &[A]) {
    header(buf, args.len());
    for arg in args {
        arg_bytes(buf, arg.as_ref());
    }
}

/// Appends the start of a command of `count` arguments, each to be appended with [`arg_bytes`].
pub fn header(buf: &mut Vec<u8>, count: usize) {
    write_line(buf, b'*', count);
}

/// Appends one argument of a command.
pub fn arg_bytes(buf: &mut Vec<u8>, arg: &[u8]) {
    write_line(buf, b'$', arg.len());
    buf.extend_from_slice(arg);
    buf.extend_from_slice(b"\r\n");
}

/// Appends one number as an argument of a command.
pub fn arg_number(buf: &mut Vec<u8>, n: impl itoa::Integer) {
    arg_bytes(buf, itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `kind` and `n` as a line (without `core::fmt`, which costs several times as much on the hot path).
fn write_line(buf: &mut Vec<u8>, kind: u8, n: usize) {
    buf.push(kind);
    buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    buf.extend_from_slice(b"\r\n");
}

/// How many arrays a reply may nest, one in another: more than any reply to our commands holds (`EXEC`'s, an array
/// of replies that are not arrays, holds one), and few enough that [`parse`], which recurses once a level, cannot
/// overflow a thread's stack on bytes that declare arrays in arrays without end (10,000 levels of `*1\r\n`, 40 KB,
/// did on a 2 MiB stack).
const MAX_DEPTH: usize = 64;

/// Reads the reply at the start of `buf`: it and its length, or `None` while it is incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    parse_nested(buf, MAX_DEPTH)
}

/// [`parse`], for a reply that may nest `depth` arrays (itself counting as one if it is an array).
fn parse_nested(buf: &[u8], depth: usize) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let Some((line, mut at)) = line(buf)? else { return Ok(None) };
    let (kind, text) = (line[0], &line[1..]);
    let reply = match kind {
        b':' => Reply::Int(number(text)?),
        b'+' => Reply::Status(String::from_utf8_lossy(text).into_owned()),
        b'-' => Reply::Error(String::from_utf8_lossy(text).into_owned()),
        b'$' => {
            let len = number(text)?;
            if len < 0 {
                return Ok(Some((Reply::Nil, at)));
            }
            at += len as usize + 2;
            if buf.len() < at {
                return Ok(None);
            }
            // A bulk string ends with CRLF where its length says: anything else means the stream is out of step.
            if &buf[at - 2..at] != b"\r\n" {
                return Err(ProtocolError("a bulk string longer than its length".to_owned()));
            }
            Reply::Other
        }
        b'*' => {
            let count = number(text)?;
            if count < 0 {
                return Ok(Some((Reply::Nil, at)));
            }
            let Some(depth) = depth.checked_sub(1) else {
                return Err(ProtocolError(format!("a reply of arrays nested more than {MAX_DEPTH} deep")));
            };
            let mut parts = Vec::with_capacity(count.min(64) as usize);
            for _ in 0..count {
                let Some((part, len)) = parse_nested(&buf[at..], depth)? else { return Ok(None) };
                parts.push(part);
                at += len;
            }
            Reply::Array(parts)
        }
        other => return Err(ProtocolError(format!("unexpected reply type byte {other:#04x}"))),
    };
    Ok(Some((reply, at)))
}

/// The first line of `buf` without its CRLF, and the length with it.
fn line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
    if end == 0 {
        return Err(ProtocolError("empty reply line".to_owned()));
    }
    Ok(Some((&buf[..end], end + 2)))
}

fn number(text: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| ProtocolError(format!("bad number '{}'", String::from_utf8_lossy(text))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_a_command() {
        let mut buf = Vec::new();
        encode(&mut buf, &["EVALSHA", "", "0123456789"]);
        assert_eq!(buf, b"*3\r\n$7\r\nEVALSHA\r\n$0\r\n\r\n$10\r\n0123456789\r\n");
    }

    #[test]
    fn parses_each_kind_and_waits_for_the_rest() {
        assert_eq!(parse(b":-42\r\n:1"), Ok(Some((Reply::Int(-42), 6))));
        assert_eq!(parse(b"+OK\r\n"), Ok(Some((Reply::Status("OK".into()), 5))));
        assert_eq!(parse(b"-NOSCRIPT x\r\n"), Ok(Some((Reply::Error("NOSCRIPT x".into()), 13))));
        assert_eq!(parse(b"$3\r\nabc\r\n"), Ok(Some((Reply::Other, 9))));
        assert_eq!(parse(b"$-1\r\n"), Ok(Some((Reply::Nil, 5))));
        assert_eq!(parse(b"*2\r\n:1\r\n$1\r\nx\r\n"), Ok(Some((Reply::Array(vec![Reply::Int(1), Reply::Other]), 15))));
        assert_eq!(parse(b"*-1\r\n"), Ok(Some((Reply::Nil, 5))));
        for partial in [&b""[..], b":4", b"$3\r\nab", b"*2\r\n:1\r\n"] {
            assert_eq!(parse(partial), Ok(None), "{partial:?}");
        }
        assert!(parse(b"?\r\n").is_err());
        assert!(parse(b":x\r\n").is_err());
    }

    #[test]
    fn splits_a_reply_among_the_calls_it_answers() {
        let array = Reply::Array(vec![Reply::Int(1), Reply::Error("WRONGTYPE".into())]);
        assert_eq!(array.clone().into_parts(2), vec![Reply::Int(1), Reply::Error("WRONGTYPE".into())]);
        assert_eq!(array.clone().into_parts(1), vec![array]);
        assert_eq!(Reply::Int(7).into_parts(1), vec![Reply::Int(7)]);
        let error = Reply::Error("NOSCRIPT".into());
        assert_eq!(error.clone().into_parts(3), vec![error.clone(), error.clone(), error]);
    }
}
