//! The door's TLS to an `https://` upstream ([`Endpoint::tls`](super::Endpoint::tls)): the
//! client speaks plain HTTP to the door inside the reviewer, and the door speaks TLS to the
//! upstream with [rustls](https://docs.rs/rustls/0.23) (TLS 1.2 and 1.3, the aws-lc-rs
//! provider, post-quantum key exchange preferred), checking the upstream's certificate chain against the system's root
//! certificates and its name against the upstream's host (server name indication sent, ALPN
//! `http/1.1`, as the door frames HTTP/1.1).
//!
//! The roots are the system's (rustls-native-certs: the distribution's store, e.g.
//! `/etc/ssl/certs`, or `SSL_CERT_FILE`/`SSL_CERT_DIR` in the executor's environment), loaded
//! once per process, plus the DER certificates the program embedding the executor adds
//! ([`Settings::extra_roots`](super::Settings::extra_roots)); never from the plan.
//!
//! One connection's TLS state is shared by its two forwarding threads: the one reading the
//! upstream ([`TlsReader`]) reads the socket without the lock and decrypts under it; the one
//! writing to it ([`TlsWriter`]) encrypts under it. Records are written to the socket under
//! a second lock taken first, so they leave in the order they were sealed. Bounded: at most
//! [`BUFFER_BYTES`] of plaintext waits to be sealed, one [`BUFFER_BYTES`] read of records
//! waits to be opened, and rustls holds at most 16 KiB of opened plaintext.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

use super::BUFFER_BYTES;

/// How long the door waits for an upstream's TLS handshake to finish.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The system's root certificates, loaded once per process; or why there are none.
fn system_roots() -> &'static Result<Vec<CertificateDer<'static>>, String> {
    static ROOTS: OnceLock<Result<Vec<CertificateDer<'static>>, String>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            let why: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
            return Err(format!(
                "the system has no root certificate (install the distribution's \
                 ca-certificates, or set SSL_CERT_FILE for the executor){}",
                if why.is_empty() {
                    String::new()
                } else {
                    format!(": {}", why.join("; "))
                }
            ));
        }
        Ok(found.certs)
    })
}

/// The TLS configuration of a door: the system's roots and `extra` (DER certificates).
///
/// # Errors
/// What is wrong, as a phrase: an `extra` certificate that is not one, no root at all.
pub(super) fn config(extra: &[Vec<u8>]) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    let system = system_roots();
    if let Ok(certs) = system {
        roots.add_parsable_certificates(certs.iter().cloned());
    }
    for (i, der) in extra.iter().enumerate() {
        roots
            .add(CertificateDer::from(der.clone()))
            .map_err(|e| format!("extra root certificate {i} is not one the door can use: {e}"))?;
    }
    if roots.is_empty() {
        return Err(system
            .as_ref()
            .err()
            .cloned()
            .unwrap_or_else(|| "no root certificate".into()));
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The name the upstream's certificate must hold: the host of `upstream` (`host:port`),
/// without the brackets of an IPv6 address.
///
/// # Errors
/// When the host is neither a DNS name nor an IP address.
pub(super) fn server_name(upstream: &str) -> Result<ServerName<'static>, String> {
    let host = upstream.rsplit_once(':').map_or(upstream, |(h, _)| h);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(host.to_owned())
        .map_err(|_| format!("{host:?} is neither a DNS name nor an IP address"))
}

/// One connection's TLS state, and the socket's writing side.
struct Shared {
    conn: Mutex<ClientConnection>,
    out: Mutex<TcpStream>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The records `conn` has sealed and not yet handed out.
fn sealed(conn: &mut ClientConnection) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out)?;
    }
    Ok(out)
}

impl Shared {
    /// Writes what the connection has sealed (an alert, a key update's answer).
    fn flush(&self) -> io::Result<()> {
        let mut out = lock(&self.out);
        let records = sealed(&mut lock(&self.conn))?;
        out.write_all(&records)
    }
}

/// Reads the upstream's answers, decrypted.
pub(super) struct TlsReader {
    shared: Arc<Shared>,
    socket: TcpStream,
    raw: Box<[u8]>,
    start: usize,
    end: usize,
    /// The socket is at its end and rustls was told so.
    eof: bool,
}

/// Writes the client's requests, encrypted.
pub(super) struct TlsWriter {
    shared: Arc<Shared>,
}

/// Connects TLS over `socket` to the upstream named `name`, the handshake done within
/// [`HANDSHAKE_TIMEOUT`]: its reading and writing halves.
///
/// # Errors
/// The handshake's failure (a certificate not valid for the name, not signed by a root the
/// door trusts, expired; an upstream that does not speak TLS) or its timeout
/// ([`io::ErrorKind::WouldBlock`] or [`io::ErrorKind::TimedOut`]).
pub(super) fn connect(
    socket: TcpStream,
    config: &Arc<ClientConfig>,
    name: ServerName<'static>,
) -> io::Result<(TlsReader, TlsWriter)> {
    let mut conn = ClientConnection::new(Arc::clone(config), name).map_err(io::Error::other)?;
    conn.set_buffer_limit(Some(BUFFER_BYTES));
    socket.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    socket.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let deadline = std::time::Instant::now() + HANDSHAKE_TIMEOUT;
    while conn.is_handshaking() {
        if std::time::Instant::now() > deadline {
            return Err(io::ErrorKind::TimedOut.into());
        }
        conn.complete_io(&mut &socket)?;
    }
    while conn.wants_write() {
        conn.write_tls(&mut &socket)?;
    }
    socket.set_read_timeout(None)?;
    socket.set_write_timeout(None)?;
    let shared = Arc::new(Shared {
        conn: Mutex::new(conn),
        out: Mutex::new(socket.try_clone()?),
    });
    let reader = TlsReader {
        shared: Arc::clone(&shared),
        socket,
        raw: vec![0; BUFFER_BYTES].into_boxed_slice(),
        start: 0,
        end: 0,
        eof: false,
    };
    Ok((reader, TlsWriter { shared }))
}

impl TlsReader {
    /// The socket, to set its read timeout.
    pub(super) fn socket(&self) -> &TcpStream {
        &self.socket
    }

    /// Hands rustls the records read and not yet taken; `false` when there are none.
    fn feed(&mut self) -> io::Result<bool> {
        if self.start == self.end {
            return Ok(false);
        }
        let mut conn = lock(&self.shared.conn);
        let mut slice = &self.raw[self.start..self.end];
        self.start += conn.read_tls(&mut slice)?;
        let processed = conn.process_new_packets();
        let wants_write = conn.wants_write();
        drop(conn);
        if wants_write {
            self.shared.flush()?;
        }
        processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(true)
    }
}

impl Read for TlsReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match lock(&self.shared.conn).reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The upstream closed without `close_notify`, as many do once an answer is
                // framed; the client's HTTP framing tells a cut answer.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.feed()? {
                continue;
            }
            if self.eof {
                // Told, and still no plaintext nor an end: nothing more will come.
                return Ok(0);
            }
            let n = self.socket.read(&mut self.raw)?;
            (self.start, self.end) = (0, n);
            if n == 0 {
                self.eof = true;
                // An empty read tells rustls the end.
                let mut empty: &[u8] = &[];
                let mut conn = lock(&self.shared.conn);
                conn.read_tls(&mut empty)?;
                conn.process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            }
        }
    }
}

impl Write for TlsWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut out = lock(&self.shared.out);
        let (n, records) = {
            let mut conn = lock(&self.shared.conn);
            let n = conn.writer().write(buf)?;
            (n, sealed(&mut conn)?)
        };
        out.write_all(&records)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsWriter {
    /// Seals all of `buf` and writes its records before `deadline`, if any (each send
    /// waiting at most what is left of it, `forward::left`): `WouldBlock` (or `TimedOut`)
    /// when it passes first, the records then part written (the connection must end).
    pub(super) fn write_before(
        &mut self,
        buf: &[u8],
        deadline: Option<std::time::Instant>,
    ) -> io::Result<usize> {
        let mut out = lock(&self.shared.out);
        let (n, records) = {
            let mut conn = lock(&self.shared.conn);
            let n = conn.writer().write(buf)?;
            (n, sealed(&mut conn)?)
        };
        let mut rest = &records[..];
        while !rest.is_empty() {
            out.set_write_timeout(super::forward::left(deadline))?;
            match out.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(sent) => rest = &rest[sent..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// Sets the socket's write timeout (`SO_SNDTIMEO`): each write of the records of one
    /// [`Write::write`] waits at most `wait`.
    pub(super) fn set_write_timeout(&self, wait: Option<std::time::Duration>) -> io::Result<()> {
        lock(&self.shared.out).set_write_timeout(wait)
    }

    /// Ends the writing side (`close_notify`, then the socket's), or both.
    pub(super) fn shutdown(&self, how: Shutdown) {
        let out = lock(&self.shared.out);
        if how != Shutdown::Read {
            let records = {
                let mut conn = lock(&self.shared.conn);
                conn.send_close_notify();
                sealed(&mut conn).unwrap_or_default()
            };
            let _ = (&*out).write_all(&records);
        }
        let _ = out.shutdown(how);
    }
}
