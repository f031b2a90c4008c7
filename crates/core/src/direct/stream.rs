//! The byte stream of a socket for direct calls (open.rs): plain TCP, or TLS over it by rustls, which a caller
//! drives without blocking (the Node binding, from node's event loop). It reads and writes what the socket takes
//! now and tells when more must wait for the socket to become writable.

use snatch_protocol::offers::Offers;
use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;

/// A non-blocking socket for direct calls, with or without TLS.
pub struct DirectStream {
    tcp: TcpStream,
    /// The TLS session over `tcp`, when the server is reached by `rediss://`.
    tls: Option<Box<rustls::ClientConnection>>,
    /// The server's own commands, found by the handshake.
    offers: Offers,
}

impl std::fmt::Debug for DirectStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectStream").field("tls", &self.tls.is_some()).finish_non_exhaustive()
    }
}

impl DirectStream {
    /// `tcp` (non-blocking), with `tls` the session whose handshake is done, to a server that offers `offers`.
    pub(crate) fn new(tcp: TcpStream, tls: Option<rustls::ClientConnection>, offers: Offers) -> Self {
        Self { tcp, tls: tls.map(Box::new), offers }
    }

    /// The server's own commands the calls on this socket may use.
    pub fn offers(&self) -> Offers {
        self.offers
    }

    /// Reads what has arrived into `buf`: as much as there is, up to its size (decrypted under TLS). `Ok(0)` at the
    /// end of the stream; `WouldBlock` when nothing has arrived. Less than `buf` holds means all there is for now:
    /// the socket is read until it has no more (under TLS too, so no decrypted bytes wait unseen).
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = &mut self.tls else { return self.tcp.read(buf) };
        let mut filled = 0;
        while filled < buf.len() {
            match tls.reader().read(&mut buf[filled..]) {
                Ok(0) => return Ok(filled), // the server closed the session
                Ok(n) => {
                    filled += n;
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            // No decrypted bytes left: take more from the socket.
            match tls.read_tls(&mut self.tcp) {
                Ok(0) => return Ok(filled),
                Ok(_) => {
                    tls.process_new_packets().map_err(io::Error::other)?;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && filled > 0 => return Ok(filled),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }

    /// Takes bytes of `data` to send and writes what the socket takes now: how many of `data` were taken (under TLS
    /// all of them, encrypted and kept until the socket takes them: see [`DirectStream::wants_write`]).
    pub fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let Some(tls) = &mut self.tls else { return self.tcp.write(data) };
        let taken = tls.writer().write(data)?;
        self.send_pending()?;
        Ok(taken)
    }

    /// Writes what TLS keeps for the socket (encrypted records, or its own messages), as far as the socket takes it.
    pub fn send_pending(&mut self) -> io::Result<()> {
        let Some(tls) = &mut self.tls else { return Ok(()) };
        while tls.wants_write() {
            match tls.write_tls(&mut self.tcp) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Whether bytes wait for the socket to become writable (only under TLS: written plain bytes are never kept).
    pub fn wants_write(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| tls.wants_write())
    }
}

#[cfg(unix)]
impl std::os::fd::AsRawFd for DirectStream {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.tcp.as_raw_fd()
    }
}
