//! Property tests of the direct connection's RESP code (resp.rs) and of the pairing of its replies with calls
//! (direct/awaited.rs), run with many cases on stable Rust (the cargo-fuzz targets of fuzz/ need nightly): the parser
//! on arbitrary and hostile bytes, on valid replies however they are split, the writer against the redis crate's
//! parser, and the pairing on arbitrary registrations and replies. Each property runs the cases [`config`] gives it,
//! or `PROPTEST_CASES`; `npm run fuzz` (scripts/fuzz.js) runs them for a given time.

use proptest::prelude::*;
use proptest::sample::Index;
use snatch_protocol::direct::awaited::AwaitedReplies;
use snatch_protocol::resp::{self, ProtocolError, Reply};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;

/// The system allocator, counting the bytes each thread holds (see [`peak_allocation`]).
struct Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

thread_local! {
    /// The bytes this thread holds (allocated less freed: negative when it frees another thread's), and the most it
    /// held since the last [`peak_allocation`] started.
    static HELD: Cell<(isize, isize)> = const { Cell::new((0, 0)) };
}

/// Adds `bytes` to what this thread holds.
fn hold(bytes: isize) {
    let _ = HELD.try_with(|held| {
        let now = held.get().0 + bytes;
        held.set((now, held.get().1.max(now)));
    });
}

// SAFETY: every call goes to the system allocator unchanged; counting allocates nothing.
unsafe impl GlobalAlloc for Counting {
    // SAFETY: the caller's contract is `GlobalAlloc::alloc`'s, which `System` needs.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: `layout` as the caller passed it, under the same contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            hold(layout.size() as isize);
        }
        ptr
    }

    // SAFETY: the caller's contract is `GlobalAlloc::dealloc`'s, which `System` needs.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through `alloc` or `realloc` above, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        hold(-(layout.size() as isize));
    }

    // SAFETY: the caller's contract is `GlobalAlloc::realloc`'s, which `System` needs.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` through `alloc` or `realloc` above, with `layout`; `new_size` as passed.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            hold(new_size as isize - layout.size() as isize);
        }
        moved
    }
}

/// What `f` returns, and the most bytes this thread held at once while it ran, beyond what it held before.
fn peak_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = HELD.with(|held| {
        let now = held.get().0;
        held.set((now, now));
        now
    });
    let result = f();
    (result, HELD.with(|held| held.get().1 - before) as usize)
}

/// The most `parse` may allocate for `len` bytes, in proportion to them and not to the lengths they declare: an
/// array's header (4 bytes at least) may reserve room for 64 elements before they come, and everything else parse
/// allocates (elements past those, texts, an error's message) takes less room than that for each byte.
fn allocation_bound(len: usize) -> usize {
    256 + len * 20 * size_of::<Reply>()
}

/// The configuration of the properties: `cases` cases each, unless `PROPTEST_CASES` says how many (proptest's
/// default configuration reads it; `ProptestConfig::with_cases` would not).
fn config(cases: u32) -> ProptestConfig {
    let config = ProptestConfig::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() { config.cases } else { cases };
    // No file of failed cases: proptest finds none for a test outside src/; a failure prints its minimal input.
    ProptestConfig { cases, failure_persistence: None, ..config }
}

/// A reply as a server sends it: a [`Reply`] with its bulk string's bytes, or a nil of either kind.
#[derive(Debug, Clone)]
enum Sent {
    Int(i64),
    Status(String),
    Error(String),
    Bulk(Vec<u8>),
    /// A nil array (`*-1`) or bulk string (`$-1`).
    Nil {
        array: bool,
    },
    Array(Vec<Sent>),
}

impl Sent {
    /// Appends the reply in RESP (written here, not with resp.rs's writer, which is under test too).
    fn write(&self, buf: &mut Vec<u8>) {
        match self {
            Sent::Int(n) => buf.extend_from_slice(format!(":{n}\r\n").as_bytes()),
            Sent::Status(text) => buf.extend_from_slice(format!("+{text}\r\n").as_bytes()),
            Sent::Error(text) => buf.extend_from_slice(format!("-{text}\r\n").as_bytes()),
            Sent::Bulk(bytes) => {
                buf.extend_from_slice(format!("${}\r\n", bytes.len()).as_bytes());
                buf.extend_from_slice(bytes);
                buf.extend_from_slice(b"\r\n");
            }
            Sent::Nil { array } => buf.extend_from_slice(if *array { b"*-1\r\n" } else { b"$-1\r\n" }),
            Sent::Array(parts) => {
                buf.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
                for part in parts {
                    part.write(buf);
                }
            }
        }
    }

    /// The reply `parse` reads: a bulk string's bytes skipped.
    fn parsed(&self) -> Reply {
        match self {
            Sent::Int(n) => Reply::Int(*n),
            Sent::Status(text) => Reply::Status(text.clone()),
            Sent::Error(text) => Reply::Error(text.clone()),
            Sent::Bulk(_) => Reply::Other,
            Sent::Nil { .. } => Reply::Nil,
            Sent::Array(parts) => Reply::Array(parts.iter().map(Sent::parsed).collect()),
        }
    }
}

/// Up to `max` bytes, CR and LF an eighth of the time each.
fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let byte = any::<u16>().prop_map(|n| match n >> 8 {
        0..32 => b'\r',
        32..64 => b'\n',
        _ => n as u8,
    });
    prop::collection::vec(byte, 0..max)
}

/// A status or error text: ASCII and wider characters, lone CRs and LFs, but no CRLF.
fn line() -> impl Strategy<Value = String> {
    let chars = vec!['a', 'Z', '0', ' ', '-', '+', ':', '$', '*', '\0', '\r', '\n', '\u{7f}', 'é', '🔒'];
    prop::collection::vec(prop::sample::select(chars), 0..16).prop_map(|chars| {
        let mut text = String::new();
        for c in chars {
            if !(c == '\n' && text.ends_with('\r')) {
                text.push(c);
            }
        }
        text
    })
}

/// Any reply a server may send, arrays nested 4 deep at most.
fn sent() -> impl Strategy<Value = Sent> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Sent::Int),
        line().prop_map(Sent::Status),
        line().prop_map(Sent::Error),
        bytes(64).prop_map(Sent::Bulk),
        any::<bool>().prop_map(|array| Sent::Nil { array }),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| prop::collection::vec(inner, 0..8).prop_map(Sent::Array))
}

/// A reply as `parse` gives it, of the kinds direct calls get: one, or an array of up to 9 (as many as the replies
/// of a script call for up to 9 calls).
fn reply() -> impl Strategy<Value = Reply> {
    let leaf = (0..6u8, any::<i64>()).prop_map(|(kind, n)| match kind {
        0 => Reply::Int(n),
        1 => Reply::Status("OK".to_owned()),
        2 => Reply::Error(format!("ERR {n}")),
        3 => Reply::Nil,
        4 => Reply::Other,
        _ => Reply::Array(vec![Reply::Int(n)]),
    });
    (any::<bool>(), prop::collection::vec(leaf, 0..10)).prop_map(|(array, mut replies)| match array {
        true => Reply::Array(replies),
        false => replies.pop().unwrap_or(Reply::Nil),
    })
}

/// A number of any size as text: one an `i64` holds, a small one, one too large or too small for an `i64`.
fn number() -> impl Strategy<Value = String> {
    (any::<i128>(), 0..3u8).prop_map(|(n, form)| match form {
        0 => (n as i64).to_string(),
        1 => (n % 12 - 2).to_string(),
        _ => n.to_string(),
    })
}

/// Bytes that look like RESP more often than random bytes would: pieces of it (type bytes, lengths of every size
/// and form, line ends, lone CRs and LFs, whole headers) and random bytes, in any order; arrays nested deeper than
/// `parse` takes; or random bytes alone.
fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
    let fixed: Vec<&[u8]> = vec![b"*", b"$", b":", b"+", b"-", b"\r\n", b"\r", b"\n", b"-1", b"0", b" ", b"x"];
    let piece = prop_oneof![
        prop::sample::select(fixed).prop_map(<[u8]>::to_vec),
        number().prop_map(String::into_bytes),
        (prop::sample::select(vec!['*', '$', ':']), number())
            .prop_map(|(kind, n)| format!("{kind}{n}\r\n").into_bytes()),
        bytes(8),
    ];
    let pieces = prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat());
    let nested = (0..300usize, 0..1000u16, pieces.clone())
        .prop_map(|(depth, count, tail)| [format!("*{count}\r\n").repeat(depth).into_bytes(), tail].concat());
    prop_oneof![4 => pieces, 1 => nested, 1 => prop::collection::vec(any::<u8>(), 0..512)]
}

/// Feeds `chunks` one after another to a parser loop as the direct connection runs it (appends what was read, parses
/// replies off the front until one is incomplete, keeps the rest): each reply read, with how many bytes had been fed
/// when it was; and the bytes left unparsed.
fn read_in_chunks<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(Vec<(Reply, usize)>, usize), ProtocolError> {
    let (mut unparsed, mut fed, mut replies) = (Vec::new(), 0, Vec::new());
    for chunk in chunks {
        unparsed.extend_from_slice(chunk);
        fed += chunk.len();
        let mut at = 0;
        while let Some((reply, len)) = resp::parse(&unparsed[at..])? {
            replies.push((reply, fed));
            at += len;
        }
        unparsed.drain(..at);
    }
    Ok((replies, unparsed.len()))
}

/// A command's argument, as the writer takes it.
#[derive(Debug, Clone)]
enum Arg {
    Bytes(Vec<u8>),
    U128(u128),
    Usize(usize),
    I64(i64),
}

impl Arg {
    /// Appends the argument with the writer's function for its kind.
    fn write(&self, buf: &mut Vec<u8>) {
        match self {
            Arg::Bytes(bytes) => resp::arg_bytes(buf, bytes),
            Arg::U128(n) => resp::arg_number(buf, *n),
            Arg::Usize(n) => resp::arg_number(buf, *n),
            Arg::I64(n) => resp::arg_number(buf, *n),
        }
    }

    /// The bytes the server gets.
    fn bytes(&self) -> Vec<u8> {
        match self {
            Arg::Bytes(bytes) => bytes.clone(),
            Arg::U128(n) => n.to_string().into_bytes(),
            Arg::Usize(n) => n.to_string().into_bytes(),
            Arg::I64(n) => n.to_string().into_bytes(),
        }
    }
}

/// What happens to the replies a socket of direct calls awaits.
#[derive(Debug, Clone)]
enum Event {
    /// A script call for this many calls is written.
    Script(usize),
    /// An acquisition of this many commands is written.
    Acquisition(usize),
    /// A reply is read.
    Read(Reply),
}

proptest! {
    #![proptest_config(config(5000))]

    /// On any bytes, `parse` neither panics nor overflows its stack, allocates in proportion to the bytes (not to
    /// the lengths they declare), reads no more than it has, and gives, for any prefix, `None` or what it gives
    /// for the whole: a reply (the same, of the same length) or an error (the same).
    #[test]
    fn parse_takes_any_bytes(buf in hostile_bytes(), cut in any::<Index>()) {
        let (parsed, allocated) = peak_allocation(|| resp::parse(&buf));
        prop_assert!(allocated <= allocation_bound(buf.len()), "{allocated} bytes allocated for {}", buf.len());
        if let Ok(Some((_, len))) = &parsed {
            prop_assert!(0 < *len && *len <= buf.len());
            prop_assert_eq!(&resp::parse(&buf[..*len]), &parsed, "the reply alone");
        }
        let prefix = resp::parse(&buf[..cut.index(buf.len() + 1)]);
        prop_assert!(prefix == Ok(None) || prefix == parsed, "a prefix: {:?}, the whole: {:?}", prefix, parsed);
    }

    /// A command written with `header` and `arg_bytes` or `arg_number` for each argument (arbitrary bytes, numbers
    /// of each kind the callers pass) is what `encode` writes for the same bytes, and reads back, with the redis
    /// crate's parser, as an array of exactly those bulk strings; `parse` reads all of it.
    #[test]
    fn written_commands_read_back(
        args in prop::collection::vec(
            prop_oneof![
                3 => bytes(48).prop_map(Arg::Bytes),
                1 => any::<u128>().prop_map(Arg::U128),
                1 => any::<usize>().prop_map(Arg::Usize),
                1 => any::<i64>().prop_map(Arg::I64),
            ],
            0..12,
        ),
    ) {
        let mut buf = Vec::new();
        resp::header(&mut buf, args.len());
        for arg in &args {
            arg.write(&mut buf);
        }
        let bytes: Vec<Vec<u8>> = args.iter().map(Arg::bytes).collect();
        let mut encoded = Vec::new();
        resp::encode(&mut encoded, &bytes);
        prop_assert_eq!(&buf, &encoded);
        let read = redis::parse_redis_value(&buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(read, redis::Value::Array(bytes.into_iter().map(redis::Value::BulkString).collect()));
        prop_assert_eq!(resp::parse(&buf), Ok(Some((Reply::Array(vec![Reply::Other; args.len()]), buf.len()))));
    }

    /// Whatever is written and read, in any order, each reply completes the first command awaiting it when it is its
    /// last (a script call's one; an acquisition's last command's, after two or three), and then gives exactly one
    /// reply for each of its calls, none otherwise; a reply no command awaits is an error that leaves the rest as it
    /// was.
    #[test]
    fn each_call_gets_one_reply(
        events in prop::collection::vec(
            prop_oneof![
                4 => reply().prop_map(Event::Read),
                1 => (0..4usize).prop_map(Event::Script),
                1 => (2..=3usize).prop_map(Event::Acquisition),
            ],
            0..64,
        ),
    ) {
        let mut awaited = AwaitedReplies::default();
        // For each command written, the replies it still awaits and how many calls it answers.
        let mut model: VecDeque<(usize, usize)> = VecDeque::new();
        for event in events {
            match event {
                Event::Script(calls) => {
                    awaited.command(calls);
                    model.push_back((1, calls));
                }
                Event::Acquisition(commands) => {
                    awaited.acquisition(commands);
                    model.push_back((commands, 1));
                }
                Event::Read(reply) => {
                    let answers = awaited.take(reply).map(|answers| answers.len());
                    let Some((left, calls)) = model.front_mut() else {
                        prop_assert!(answers.is_err(), "a reply no command awaits: {:?}", answers);
                        continue;
                    };
                    *left -= 1;
                    let expected = if *left == 0 { *calls } else { 0 };
                    if *left == 0 {
                        model.pop_front();
                    }
                    prop_assert_eq!(answers, Ok(expected));
                }
            }
        }
    }
}

proptest! {
    // Fewer cases: each is several replies, fed in up to hundreds of chunks.
    #![proptest_config(config(2000))]

    /// Valid replies, one after another, are read the same however the bytes are split (here at random points, or
    /// byte by byte): each as soon as its last byte is fed and not before, all of them, nothing left; as parsing
    /// the whole at once reads them.
    #[test]
    fn valid_replies_are_read_however_split(
        sent in prop::collection::vec(sent(), 1..8),
        cuts in prop::collection::vec(any::<Index>(), 0..12),
        byte_by_byte in prop::bool::weighted(0.1),
    ) {
        let (mut buf, mut ends) = (Vec::new(), Vec::new());
        for reply in &sent {
            reply.write(&mut buf);
            ends.push(buf.len());
        }
        let mut cuts: Vec<usize> = match byte_by_byte {
            true => (1..buf.len()).collect(),
            false => cuts.iter().map(|cut| cut.index(buf.len() + 1)).collect(),
        };
        cuts.extend([0, buf.len()]);
        cuts.sort_unstable();
        cuts.dedup();
        let expected: Vec<(Reply, usize)> = sent
            .iter()
            .zip(ends)
            .map(|(reply, end)| (reply.parsed(), *cuts.iter().find(|&&cut| cut >= end).expect("the last cut")))
            .collect();
        let at_once = expected.iter().map(|(reply, _)| (reply.clone(), buf.len())).collect();
        prop_assert_eq!(read_in_chunks(cuts.windows(2).map(|w| &buf[w[0]..w[1]])), Ok((expected, 0)));
        prop_assert_eq!(read_in_chunks([&buf[..]]), Ok((at_once, 0)), "at once");
    }
}

/// Hostile lengths, and what `parse` makes of them: a nil for any negative length, `None` for a length
/// longer than what came (however long, without reserving room for it), an error for a length that is no `i64` or
/// no number, and a bulk string's end taken as its CRLF whatever it holds (as hiredis does).
#[test]
fn hostile_lengths() {
    /// What `parse` gives, but for an error's message.
    type Parsed = Result<Option<(Reply, usize)>, ()>;
    let cases: [(&[u8], Parsed); 15] = [
        (b"$9999999999999\r\n", Ok(None)),
        (b"$9223372036854775807\r\nabc", Ok(None)),
        (b"*9223372036854775807\r\n:1\r\n:2\r\n", Ok(None)),
        (b"*9999999999999\r\n*9999999999999\r\n$9999999999999\r\n", Ok(None)),
        (b"*-5\r\n", Ok(Some((Reply::Nil, 5)))),
        (b"$-9223372036854775808\r\n", Ok(Some((Reply::Nil, 23)))),
        (b"$9223372036854775808\r\n", Err(())),
        (b"*99999999999999999999999999\r\n", Err(())),
        (b"$3x\r\nabc\r\n", Err(())),
        (b"$ 3\r\nabc\r\n", Err(())),
        (b"$\r\n", Err(())),
        (b"\r\n", Err(())),
        (b":1\n2\r\n", Err(())),
        // A bulk string must end with CRLF where its length says.
        (b"$3\r\nabcXY", Err(())),
        (b"$3\r\nabc\r\n", Ok(Some((Reply::Other, 9)))),
    ];
    for (input, expected) in cases {
        let (parsed, allocated) = peak_allocation(|| resp::parse(input));
        assert_eq!(parsed.map_err(|_| ()), expected, "{}", input.escape_ascii());
        assert!(allocated <= allocation_bound(input.len()), "{allocated} bytes for {}", input.escape_ascii());
    }
}

/// Arrays nested a million deep (4 MB of `*1\r\n`) are refused with an error; `parse`, which recurses once a level,
/// used to follow them until the thread's stack overflowed, aborting the process (at about 10,000 levels, 40 KB, on a
/// 2 MiB thread, in a release build). Up to 64 levels are read as before.
#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for header in ["*1\r\n", "*9999999999\r\n"] {
        let buf = header.repeat(1_000_000).into_bytes();
        assert!(resp::parse(&buf).is_err(), "{header:?}");
    }
    let nested = |depth: usize| ["*1\r\n".repeat(depth), ":7\r\n".to_owned()].concat().into_bytes();
    let expected = (0..64).fold(Reply::Int(7), |reply, _| Reply::Array(vec![reply]));
    assert_eq!(resp::parse(&nested(64)), Ok(Some((expected, 64 * 4 + 4))));
    assert!(resp::parse(&nested(65)).is_err());
}
