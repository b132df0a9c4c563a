//! The executor's side of the door: accepting on each listening socket, and forwarding each
//! connection to its endpoint's upstream (the module docs of [`door`](super)).

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs as _};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{BUFFER_BYTES, CONNECT_TIMEOUT, Endpoint, MAX_CONNECTIONS, Shared, THREAD_STACK};

/// Accepts on `listener` until the door closes, each connection forwarded by a thread of
/// its own; past [`MAX_CONNECTIONS`] open, one is closed at once, with a log line.
pub(super) fn accept_loop(listener: &TcpListener, endpoint: &Endpoint, shared: &Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let client = match accepted {
            Ok((client, _)) => client,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
            Err(e) => {
                shared.log(format!("door port {}: accept failed: {e}", endpoint.port));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if shared.open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.open.fetch_sub(1, Ordering::SeqCst);
            shared.log(format!(
                "door port {}: refused a connection: {MAX_CONNECTIONS} are open",
                endpoint.port
            ));
            continue;
        }
        let (endpoint, shared_c) = (endpoint.clone(), Arc::clone(shared));
        let spawned = std::thread::Builder::new()
            .name(format!("door-{}-c", endpoint.port))
            .stack_size(THREAD_STACK)
            .spawn(move || {
                forward(client, &endpoint, &shared_c);
                shared_c.open.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(e) = spawned {
            shared.open.fetch_sub(1, Ordering::SeqCst);
            shared.log(format!("door: no thread for a connection: {e}"));
        }
    }
}

/// Connects to `upstream` (`host:port`), each address it resolves to in turn.
fn connect(upstream: &str) -> std::io::Result<TcpStream> {
    let mut error = std::io::Error::from_raw_os_error(libc::EHOSTUNREACH);
    for addr in upstream.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => error = e,
        }
    }
    Err(error)
}

/// Forwards one connection to the endpoint's upstream, both ways, until both are closed.
fn forward(client: TcpStream, endpoint: &Endpoint, shared: &Arc<Shared>) {
    let upstream = match connect(&endpoint.upstream) {
        Ok(u) => u,
        Err(e) => {
            shared.log(format!(
                "door port {}: upstream {} cannot be reached: {e}; answered 502",
                endpoint.port, endpoint.upstream
            ));
            bad_gateway(client, endpoint);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let id = shared.next.fetch_add(1, Ordering::SeqCst);
    let clones = client
        .try_clone()
        .and_then(|c| Ok((c, upstream.try_clone()?)));
    let Ok((client_r, upstream_r)) = clones else {
        shared.log(format!(
            "door port {}: cannot share a connection",
            endpoint.port
        ));
        return;
    };
    if let (Ok(mut live), Ok(a), Ok(b)) =
        (shared.live.lock(), client.try_clone(), upstream.try_clone())
    {
        live.push((id, a, b));
    }
    let down = std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn(move || pipe(upstream_r, client));
    let up = match &endpoint.credential {
        None => pipe(client_r, upstream),
        Some(credential) => {
            match super::http::requests(client_r, upstream, credential, &endpoint.upstream) {
                Ok(()) => Ok(()),
                Err(super::http::Failure::Io(e)) => Err(e),
                Err(super::http::Failure::Refused(why)) => {
                    shared.log(format!(
                        "door port {}: refused a request: {why}; closed the connection",
                        endpoint.port
                    ));
                    Ok(())
                }
            }
        }
    };
    let down = down.map(|t| t.join());
    if let Ok(mut live) = shared.live.lock() {
        live.retain(|(i, _, _)| *i != id);
    }
    for (way, result) in [("to", Some(up)), ("from", down.ok().and_then(Result::ok))] {
        match result {
            Some(Err(e)) if !shared.stopping.load(Ordering::SeqCst) => shared.log(format!(
                "door port {}: forwarding {way} {} failed: {e}",
                endpoint.port, endpoint.upstream
            )),
            None => shared.log(format!(
                "door port {}: no thread to forward from {}",
                endpoint.port, endpoint.upstream
            )),
            _ => {}
        }
    }
}

/// Copies `from` to `to` as it comes, then shuts `to`'s writing side (the other end sees
/// end-of-file) and `from`'s reading side.
pub(super) fn pipe(mut from: TcpStream, mut to: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; BUFFER_BYTES];
    let result = loop {
        match from.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                if let Err(e) = to.write_all(&buf[..n]) {
                    break Err(e);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
    // A reset or a closed peer is how a connection ends, not a fault of the door's.
    match result {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::NotConnected
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Answers `502 Bad Gateway` naming the endpoint, and closes.
fn bad_gateway(client: TcpStream, endpoint: &Endpoint) {
    let body = format!(
        "kcap door: the upstream of port {} ({}) cannot be reached\n",
        endpoint.port, endpoint.upstream
    );
    answer_and_close(client, "502 Bad Gateway", &body);
}

/// Answers `status` with `body` (plain text), then reads what the client still sends (up to
/// 64 KiB, 1 s) so that closing does not reset the connection before the answer is read.
pub(super) fn answer_and_close(mut client: TcpStream, status: &str, body: &str) {
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(answer.as_bytes());
    let _ = client.shutdown(Shutdown::Write);
    let _ = client.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sink = [0u8; 4096];
    let mut left = 64 * 1024;
    while let Ok(n) = client.read(&mut sink) {
        if n == 0 || n >= left {
            break;
        }
        left -= n;
    }
}
