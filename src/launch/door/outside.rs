//! The way out that is refused, seen: inside the reviewer's namespace every address but the
//! loopback routes to a tun device (`kcap0`) whose other end the door holds. A packet the
//! reviewer sends toward another host (a TCP connection's first segment, a UDP datagram: a
//! name lookup, a ping) reaches the door instead of the network: the door writes a log line
//! naming it (a name lookup with the name asked for) and answers with an ICMP "administratively
//! prohibited" error (RFC 792 type 3 code 13; RFC 4443 type 1 code 1), so that the
//! reviewer's `connect` fails at once (`EHOSTUNREACH`, `EACCES`) as it did without a route
//! (`ENETUNREACH`), not after a timeout. Nothing is ever forwarded: the door reads packets
//! and writes errors, nothing else.
//!
//! The addresses are from the documentation ranges (RFC 5737 `192.0.2.1`, RFC 3849
//! `2001:db8::1`), the device's own, so the kernel has a source address for the packets.
//! Where the tun device cannot be made (`/dev/net/tun` missing or not open to the daemon's
//! user: it is `0600` root on some machines) the namespace stays without a route: every
//! connection out still fails, unlogged, and the door's first log line says so. IPv6 is
//! added where the kernel has it; else IPv6 stays without a route.
//!
//! Connections to the namespace's own loopback (another port of `127.0.0.1`) never leave
//! it: the kernel refuses them, and nothing outside sees them.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::sync::Arc;

use super::Shared;

/// The tun device's name, NUL-terminated.
const TUN_NAME: &[u8; 6] = b"kcap0\0";
/// Its IPv4 address (RFC 5737, TEST-NET-1).
pub(super) const TUN_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// Its IPv6 address (RFC 3849, the documentation prefix).
pub(super) const TUN_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
/// The largest packet read; the device's MTU is 1500, a reviewer that raises it gets its
/// longer packets cut, which changes nothing: only the headers are read.
const PACKET_BYTES: usize = 65_536;

// ------------------------------------------------------------------------------------------
// In the child, between fork and exec: raw system calls on static or stack memory only.
// ------------------------------------------------------------------------------------------

/// The kernel's `struct rtentry` (linux/route.h), for `SIOCADDRT`; the `libc` crate has it
/// for musl only.
#[repr(C)]
struct RtEntry {
    rt_pad1: libc::c_ulong,
    rt_dst: libc::sockaddr,
    rt_gateway: libc::sockaddr,
    rt_genmask: libc::sockaddr,
    rt_flags: libc::c_ushort,
    rt_pad2: libc::c_short,
    rt_pad3: libc::c_ulong,
    rt_pad4: *mut libc::c_void,
    rt_metric: libc::c_short,
    rt_dev: *mut libc::c_char,
    rt_mtu: libc::c_ulong,
    rt_window: libc::c_ulong,
    rt_irtt: libc::c_ushort,
}

/// The kernel's `struct in6_rtmsg` (linux/ipv6_route.h), for `SIOCADDRT` on IPv6; the
/// `libc` crate's has private fields.
#[repr(C)]
struct In6Rtmsg {
    dst: libc::in6_addr,
    src: libc::in6_addr,
    gateway: libc::in6_addr,
    kind: u32,
    dst_len: u16,
    src_len: u16,
    metric: u32,
    info: libc::c_ulong,
    flags: u32,
    ifindex: libc::c_int,
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// An `ifreq` naming the tun device.
fn named_ifreq() -> libc::ifreq {
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in req.ifr_name.iter_mut().zip(TUN_NAME) {
        *to = *from as libc::c_char;
    }
    req
}

/// `sockaddr_in` of `addr`, as a `sockaddr`.
fn sockaddr_v4(addr: Ipv4Addr) -> libc::sockaddr {
    // SAFETY: both are plain data; sockaddr_in is no larger than sockaddr (16 bytes each).
    unsafe {
        let mut out: libc::sockaddr = std::mem::zeroed();
        let mut v4: libc::sockaddr_in = std::mem::zeroed();
        v4.sin_family = libc::AF_INET as libc::sa_family_t;
        v4.sin_addr.s_addr = u32::from(addr).to_be();
        std::ptr::copy_nonoverlapping(
            (&raw const v4).cast::<u8>(),
            (&raw mut out).cast::<u8>(),
            size_of::<libc::sockaddr_in>(),
        );
        out
    }
}

/// Makes the tun device and routes every address to it; returns its descriptor, or the
/// errno of the step that failed (nothing is left open then).
///
/// # Safety
/// Called between fork and exec, in the reviewer's new network namespace.
pub(super) unsafe fn tun_up() -> Result<RawFd, i32> {
    unsafe {
        let fd = libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let fail = |fd: RawFd, s: RawFd| {
            let e = errno();
            libc::close(fd);
            if s >= 0 {
                libc::close(s);
            }
            Err(e)
        };
        let mut req = named_ifreq();
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        if libc::ioctl(fd, libc::TUNSETIFF, &raw const req) != 0 {
            return fail(fd, -1);
        }
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return fail(fd, -1);
        }
        let mut req = named_ifreq();
        req.ifr_ifru.ifru_addr = sockaddr_v4(TUN_V4);
        if libc::ioctl(s, libc::SIOCSIFADDR, &raw const req) != 0 {
            return fail(fd, s);
        }
        let mut req = named_ifreq();
        if libc::ioctl(s, libc::SIOCGIFFLAGS, &raw mut req) != 0 {
            return fail(fd, s);
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(s, libc::SIOCSIFFLAGS, &raw const req) != 0 {
            return fail(fd, s);
        }
        // The default route: 0.0.0.0/0 through the device.
        let mut route: RtEntry = std::mem::zeroed();
        route.rt_dst = sockaddr_v4(Ipv4Addr::UNSPECIFIED);
        route.rt_genmask = sockaddr_v4(Ipv4Addr::UNSPECIFIED);
        route.rt_gateway = sockaddr_v4(Ipv4Addr::UNSPECIFIED);
        route.rt_flags = libc::RTF_UP;
        route.rt_dev = TUN_NAME.as_ptr().cast_mut().cast();
        if libc::ioctl(s, libc::SIOCADDRT, &raw const route) != 0 {
            return fail(fd, s);
        }
        let mut req = named_ifreq();
        let index = if libc::ioctl(s, libc::SIOCGIFINDEX, &raw mut req) == 0 {
            req.ifr_ifru.ifru_ifindex
        } else {
            -1
        };
        libc::close(s);
        if index > 0 {
            ipv6_up(index);
        }
        Ok(fd)
    }
}

/// A UDP socket on port 53 of every address of the namespace (`0.0.0.0:53`: the whole
/// loopback, `127.0.0.53` included), for the door to answer name lookups sent to a resolver
/// the host has on its loopback; its descriptor, or the errno of the step that failed.
///
/// # Safety
/// Called between fork and exec, in the reviewer's new network namespace.
pub(super) unsafe fn dns_socket() -> Result<RawFd, i32> {
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(errno());
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = 53u16.to_be();
        let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&raw const addr).cast(), len) != 0 {
            let e = errno();
            libc::close(fd);
            return Err(e);
        }
        Ok(fd)
    }
}

/// IPv6 on the device: its address and the default route `::/0`. Best effort: a kernel
/// without IPv6 has no IPv6 way out to see.
unsafe fn ipv6_up(index: libc::c_int) {
    unsafe {
        let s = libc::socket(libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return;
        }
        let address = libc::in6_ifreq {
            ifr6_addr: libc::in6_addr {
                s6_addr: TUN_V6.octets(),
            },
            ifr6_prefixlen: 128,
            ifr6_ifindex: index,
        };
        if libc::ioctl(s, libc::SIOCSIFADDR, &raw const address) == 0 {
            let mut route: In6Rtmsg = std::mem::zeroed();
            route.metric = 1;
            route.flags = u32::from(libc::RTF_UP);
            route.ifindex = index;
            libc::ioctl(s, libc::SIOCADDRT, &raw const route);
        }
        libc::close(s);
    }
}

// ------------------------------------------------------------------------------------------
// In the executor: the door's end of the device.
// ------------------------------------------------------------------------------------------

/// What a packet out of the namespace tried.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Tried {
    /// A TCP connection's first segment (`SYN`).
    Tcp(SocketAddr),
    /// A UDP datagram; to port 53, the name it asked for, when it is a DNS query.
    Udp(SocketAddr, Option<QueryName>),
    /// Another protocol (its number), a ping included.
    Other(IpAddr, u8),
}

impl std::fmt::Display for Tried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tried::Tcp(to) => write!(f, "a TCP connection to {to}"),
            Tried::Udp(to, Some(name)) => write!(f, "a name lookup of {name} (UDP to {to})"),
            Tried::Udp(to, None) => write!(f, "a UDP datagram to {to}"),
            Tried::Other(to, protocol) => write!(f, "a packet of IP protocol {protocol} to {to}"),
        }
    }
}

/// What the reviewer's `packet` tried, and the ICMP error that refuses it; `None` for a
/// packet that is no attempt to reach another host (the kernel's own multicast, a TCP
/// segment other than a connection's first, an ICMP error, a fragment that is not the
/// first, IPv4 or IPv6, or bytes that are no IP packet). IPv6 extension headers are
/// skipped to the transport header.
pub(super) fn judge(packet: &[u8]) -> Option<(Tried, Vec<u8>)> {
    match packet.first()? >> 4 {
        4 => judge_v4(packet),
        6 => judge_v6(packet),
        _ => None,
    }
}

fn judge_v4(packet: &[u8]) -> Option<(Tried, Vec<u8>)> {
    let header = usize::from(packet[0] & 0x0f) * 4;
    if header < 20 || packet.len() < header {
        return None;
    }
    // A later fragment holds no transport header.
    if u16::from_be_bytes([packet[6], packet[7]]) & 0x1fff != 0 {
        return None;
    }
    let source = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
    let to = Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]);
    if to.is_multicast() || to.is_broadcast() {
        return None;
    }
    let tried = tried(packet[9], IpAddr::V4(to), &packet[header..], 1)?;
    // RFC 792: the original header and its first 8 bytes of data.
    let quoted = &packet[..packet.len().min(header + 8)];
    let mut icmp = vec![3, 13, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(quoted);
    let sum = checksum(0, &icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let total = u16::try_from(20 + icmp.len()).ok()?;
    let mut reply = vec![0x45, 0];
    reply.extend_from_slice(&total.to_be_bytes());
    reply.extend_from_slice(&[0, 0, 0, 0, 64, 1, 0, 0]);
    reply.extend_from_slice(&to.octets());
    reply.extend_from_slice(&source.octets());
    let sum = checksum(0, &reply);
    reply[10..12].copy_from_slice(&sum.to_be_bytes());
    reply.extend_from_slice(&icmp);
    Some((tried, reply))
}

fn judge_v6(packet: &[u8]) -> Option<(Tried, Vec<u8>)> {
    if packet.len() < 40 {
        return None;
    }
    let address = |at: usize| -> Ipv6Addr {
        let mut octets = [0; 16];
        octets.copy_from_slice(&packet[at..at + 16]);
        Ipv6Addr::from(octets)
    };
    let (source, to) = (address(8), address(24));
    if to.is_multicast() {
        return None;
    }
    let (next, at) = transport_v6(packet)?;
    let tried = tried(next, IpAddr::V6(to), &packet[at..], 58)?;
    // RFC 4443: as much of the packet as fits in the minimum MTU, 1280 bytes.
    let quoted = &packet[..packet.len().min(1280 - 48)];
    let mut icmp = vec![1, 1, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(quoted);
    let length = u32::try_from(icmp.len()).ok()?;
    let mut pseudo = Vec::with_capacity(40);
    pseudo.extend_from_slice(&to.octets());
    pseudo.extend_from_slice(&source.octets());
    pseudo.extend_from_slice(&length.to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    let sum = checksum(sum_words(0, &pseudo), &icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let mut reply = vec![0x60, 0, 0, 0];
    reply.extend_from_slice(&u16::try_from(icmp.len()).ok()?.to_be_bytes());
    reply.extend_from_slice(&[58, 64]);
    reply.extend_from_slice(&to.octets());
    reply.extend_from_slice(&source.octets());
    reply.extend_from_slice(&icmp);
    Some((tried, reply))
}

/// The protocol and offset of an IPv6 `packet`'s transport header, past its extension
/// headers (RFC 8200 4: hop-by-hop, routing, destination options, fragment); `None` for a
/// fragment that is not the first. A UDP datagram over the MTU leaves the kernel in
/// fragments, each with a fragment header: read as the next protocol, a name lookup was
/// logged as three packets `of IP protocol 44`, without its port or name (red team, issue 32).
fn transport_v6(packet: &[u8]) -> Option<(u8, usize)> {
    let (mut next, mut at) = (packet[6], 40);
    // A chain longer than this is no packet the kernel sends; its next header is named.
    for _ in 0..8 {
        match next {
            0 | 43 | 60 => {
                let header = packet.get(at..at + 2)?;
                (next, at) = (header[0], at + (usize::from(header[1]) + 1) * 8);
            }
            44 => {
                let header = packet.get(at..at + 8)?;
                if u16::from_be_bytes([header[2], header[3]]) >> 3 != 0 {
                    return None;
                }
                (next, at) = (header[0], at + 8);
            }
            _ => break,
        }
    }
    (at <= packet.len()).then_some((next, at))
}

/// What a transport header `data` of `protocol` to `to` tried; `None` when it is no attempt
/// (see [`judge`]). `icmp` is the ICMP protocol number of the IP version.
fn tried(protocol: u8, to: IpAddr, data: &[u8], icmp: u8) -> Option<Tried> {
    let port = |data: &[u8]| (data.len() >= 4).then(|| u16::from_be_bytes([data[2], data[3]]));
    match protocol {
        6 => {
            // A connection's first segment: SYN without ACK.
            let flags = *data.get(13)?;
            let port = port(data)?;
            (flags & 0x12 == 0x02).then_some(Tried::Tcp(SocketAddr::new(to, port)))
        }
        17 => {
            let port = port(data)?;
            let name = (port == 53).then(|| query_name(data.get(8..)?)).flatten();
            Some(Tried::Udp(SocketAddr::new(to, port), name))
        }
        // An ICMP error is never answered (RFC 1122 3.2.2); an echo request is an attempt.
        p if p == icmp => {
            let kind = *data.first()?;
            let echo = if icmp == 1 { kind == 8 } else { kind == 128 };
            echo.then_some(Tried::Other(to, p))
        }
        p => Some(Tried::Other(to, p)),
    }
}

/// The most characters of a name the door logs; a longer one is cut there.
const NAME_SHOWN: usize = 1024;

/// The first question's name of a DNS query, as the door logs it: quoted, then, outside the
/// quotes (where no byte of the name can reach: the quoted part escapes `"`), `…(<n> bytes)`
/// when it is cut, `…(compressed name)` when a compression pointer ends it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct QueryName {
    /// The name, dotted, each byte outside printable ASCII as `\xNN`: whole, or its first
    /// [`NAME_SHOWN`] characters.
    pub(super) shown: String,
    /// When `shown` is cut: the name's length in the query, in bytes (its labels and their
    /// length bytes, up to its end or its pointer).
    pub(super) cut_of: Option<usize>,
    /// Whether a compression pointer (RFC 1035 4.1.4) ends it: a query's first name needs
    /// none, and the door follows none.
    pub(super) compressed: bool,
}

impl std::fmt::Display for QueryName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.shown)?;
        match (self.cut_of, self.compressed) {
            (Some(n), true) => write!(f, "…({n} bytes, compressed name)"),
            (Some(n), false) => write!(f, "…({n} bytes)"),
            (None, true) => f.write_str("…(compressed name)"),
            (None, false) => Ok(()),
        }
    }
}

/// The first question's name of a DNS query `message` (RFC 1035 4.1); `None` when it is not
/// one (an answer, no question, a label past the message, a label length of the reserved
/// kinds, 64 to 191). A name over [`NAME_SHOWN`] characters, or one a compression pointer
/// ends, is a name lookup still, said so ([`QueryName`]): before, each was logged as a UDP
/// datagram, its name hidden.
fn query_name(message: &[u8]) -> Option<QueryName> {
    // A query (QR clear) with at least one question.
    if message.len() < 12 || message[2] & 0x80 != 0 || message[4..6] == [0, 0] {
        return None;
    }
    let mut name = QueryName {
        shown: String::new(),
        cut_of: None,
        compressed: false,
    };
    let mut cut = false;
    let mut at = 12;
    loop {
        let length = usize::from(*message.get(at)?);
        if length == 0 {
            break;
        }
        // A pointer: two bytes, the first's top bits set.
        if length >= 0xc0 {
            message.get(at + 1)?;
            name.compressed = true;
            break;
        }
        // A label is at most 63 bytes; 64 to 191 are the reserved kinds.
        if length > 63 {
            return None;
        }
        let label = message.get(at + 1..at + 1 + length)?;
        at += 1 + length;
        if cut {
            continue;
        }
        let separator = (!name.shown.is_empty()).then_some(b'.');
        for b in separator.into_iter().chain(label.iter().copied()) {
            let before = name.shown.len();
            if b.is_ascii_graphic() {
                name.shown.push(char::from(b));
            } else {
                let _ = write!(name.shown, "\\x{b:02x}");
            }
            // Cut before the character or escape that passes the bound: none is split.
            if name.shown.len() > NAME_SHOWN {
                name.shown.truncate(before);
                cut = true;
                break;
            }
        }
    }
    if cut {
        name.cut_of = Some(at - 12);
    }
    Some(name)
}

/// The ones' complement sum of `data` as 16-bit words (RFC 1071), added to `sum`.
fn sum_words(mut sum: u32, data: &[u8]) -> u32 {
    for pair in data.chunks(2) {
        let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum
}

/// The Internet checksum (RFC 1071) of `data`, after `sum`.
fn checksum(sum: u32, data: &[u8]) -> u16 {
    let sum = sum_words(sum, data);
    !((sum & 0xffff) as u16)
}

/// The door's reader of the device: a thread that logs each attempt and answers it, until
/// dropped.
#[derive(Debug)]
pub(super) struct Watcher {
    /// Written on drop to wake the thread.
    wake: OwnedFd,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    /// Starts reading `tun` and `dns` (each where it could be made) for the door `shared`.
    ///
    /// # Errors
    /// When no pipe or thread can be made.
    pub(super) fn start(
        tun: Option<OwnedFd>,
        dns: Option<std::net::UdpSocket>,
        shared: Arc<Shared>,
    ) -> std::io::Result<Watcher> {
        let mut ends = [0; 2];
        // SAFETY: two ints for the kernel to fill.
        if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both were just made and are owned here only.
        let (wakeup, wake) =
            unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
        let thread = std::thread::Builder::new()
            .name("door-outside".into())
            .stack_size(super::THREAD_STACK)
            .spawn(move || watch(tun.as_ref(), dns.as_ref(), &wakeup, &shared))?;
        Ok(Watcher {
            wake,
            thread: Some(thread),
        })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = rustix::io::write(&self.wake, &[1]);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn watch(
    tun: Option<&OwnedFd>,
    dns: Option<&std::net::UdpSocket>,
    wakeup: &OwnedFd,
    shared: &Shared,
) {
    let mut packet = vec![0u8; PACKET_BYTES];
    let poll = |fd: Option<RawFd>| libc::pollfd {
        // poll(2) leaves out a negative descriptor.
        fd: fd.unwrap_or(-1),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        let mut fds = [
            poll(tun.map(|f| f.as_raw_fd())),
            poll(dns.map(|s| s.as_raw_fd())),
            poll(Some(wakeup.as_raw_fd())),
        ];
        // SAFETY: three pollfds of this frame.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 3, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if fds[2].revents != 0 || fds[0].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            return;
        }
        if let Some(tun) = tun.filter(|_| fds[0].revents != 0) {
            let Ok(n) = rustix::io::read(tun, &mut packet[..]) else {
                return;
            };
            if let Some((tried, reply)) = judge(&packet[..n]) {
                shared.log(format!(
                    "refused: {tried} from the reviewer (only the door's endpoints are \
                     reached); answered ICMP prohibited"
                ));
                let _ = rustix::io::write(tun, &reply);
            }
        }
        if let Some(dns) = dns.filter(|_| fds[1].revents != 0) {
            let Ok((n, from)) = dns.recv_from(&mut packet) else {
                continue;
            };
            let query = &packet[..n];
            let name = query_name(query).map_or_else(
                || "a DNS datagram".to_owned(),
                |n| format!("a name lookup of {n}"),
            );
            shared.log(format!(
                "refused: {name} (UDP to port 53 of the reviewer's own loopback) from the \
                 reviewer (only the door's endpoints are reached); answered REFUSED"
            ));
            if let Some(answer) = dns_refused(query) {
                let _ = dns.send_to(&answer, from);
            }
        }
    }
}

/// The answer `REFUSED` (RFC 1035 4.1.1: QR set, RCODE 5) to the DNS query `query`: its
/// header and question, no records; `None` for what is no query.
fn dns_refused(query: &[u8]) -> Option<Vec<u8>> {
    query_name(query)?;
    let mut answer = query.to_vec();
    answer[2] = (answer[2] | 0x80) & !0x04;
    answer[3] = (answer[3] & 0xf0) | 5;
    answer[6..12].fill(0);
    Some(answer)
}

#[cfg(test)]
mod tests;
