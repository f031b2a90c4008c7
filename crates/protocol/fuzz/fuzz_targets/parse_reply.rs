//! The reply parser (resp.rs) on arbitrary bytes, split at an arbitrary point: no panic, no stack overflow,
//! no allocation beyond libFuzzer's `-malloc_limit_mb` (a declared length must not reserve room), and the same
//! replies, or the same error, however the bytes arrive: all at once, or in two pieces, as a socket may deliver them.

#![no_main]

use libfuzzer_sys::fuzz_target;
use snatch_protocol::resp::{self, ProtocolError, Reply};

fuzz_target!(|data: &[u8]| {
    let Some((cut, bytes)) = data.split_first() else { return };
    let cut = usize::from(*cut).min(bytes.len());
    let at_once = read(&[bytes]);
    let in_two = read(&[&bytes[..cut], &bytes[cut..]]);
    assert_eq!(at_once, in_two, "split at {cut}");
});

/// The parser loop of the direct connection fed `chunks` one after another: appends what was read, parses replies
/// off the front until one is incomplete, keeps the rest. Every reply read and the bytes left, or the error.
fn read(chunks: &[&[u8]]) -> Result<(Vec<Reply>, usize), ProtocolError> {
    let (mut unparsed, mut replies) = (Vec::new(), Vec::new());
    for chunk in chunks {
        unparsed.extend_from_slice(chunk);
        let mut at = 0;
        while let Some((reply, len)) = resp::parse(&unparsed[at..])? {
            assert!(len > 0 && at + len <= unparsed.len(), "a reply of {len} bytes at {at} of {}", unparsed.len());
            replies.push(reply);
            at += len;
        }
        unparsed.drain(..at);
    }
    Ok((replies, unparsed.len()))
}
