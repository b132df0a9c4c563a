//! The door's steps in the client's process, between fork and exec (the module docs of
//! [`door`](super) list them), and the executor's end of the socketpair the listening
//! sockets come through. Raw system calls on memory prepared before the fork only.

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};

use super::outside;

/// What the child needs, prepared before the fork.
pub(super) struct ChildSide {
    pub(super) maps: crate::launch::userns::Maps,
    pub(super) ports: Vec<u16>,
    pub(super) channel: OwnedFd,
}

fn last() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// In the child: the module docs' steps 1 to 7.
///
/// # Safety
/// Called between fork and exec.
pub(super) unsafe fn enter(child: &ChildSide) -> std::io::Result<()> {
    unsafe {
        crate::launch::userns::enter(libc::CLONE_NEWNET, &child.maps)?;
        loopback_up()?;
        for &port in &child.ports {
            let fd = listen_local(port)?;
            let sent = send_fd(child.channel.as_raw_fd(), fd);
            libc::close(fd);
            sent?;
        }
        // Step 5: the way out that is refused, seen. Without it the launch goes on (a
        // connection out still fails, unlogged), and the door says why in its log.
        send_fd_or_errno(child.channel.as_raw_fd(), outside::tun_up())?;
        // Step 6: a name lookup to a resolver on the loopback (`127.0.0.53`, systemd-resolved's)
        // never reaches the tun device; the door answers it on port 53 of the namespace.
        send_fd_or_errno(child.channel.as_raw_fd(), outside::dns_socket())?;
        // Step 7: no capability after exec. A root daemon's reviewer is uid 0 in its user
        // namespace; without the sandbox's drop (`Confinement::Off`, a kernel without
        // Landlock) it kept them all over its network namespace, set `kcap0` down and
        // went out unlogged (red team, issue 32). Those it holds until exec stay, for the
        // sandbox's mounts.
        crate::launch::sandbox::drop_capabilities()?;
    }
    Ok(())
}

/// `ioctl(SIOCGIFFLAGS)`, then `SIOCSIFFLAGS` with `IFF_UP`, on `lo`.
unsafe fn loopback_up() -> std::io::Result<()> {
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(last());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        req.ifr_name[0] = b'l' as libc::c_char;
        req.ifr_name[1] = b'o' as libc::c_char;
        let mut result = libc::ioctl(s, libc::SIOCGIFFLAGS, &raw mut req);
        if result == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            result = libc::ioctl(s, libc::SIOCSIFFLAGS, &raw const req);
        }
        let error = (result != 0).then(last);
        libc::close(s);
        error.map_or(Ok(()), Err)
    }
}

/// A listening TCP socket on `127.0.0.1:port`.
unsafe fn listen_local(port: u16) -> std::io::Result<RawFd> {
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(last());
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&raw const addr).cast(), len) != 0 || libc::listen(fd, 128) != 0 {
            let e = last();
            libc::close(fd);
            return Err(e);
        }
        Ok(fd)
    }
}

/// Room for one `SCM_RIGHTS` message of one descriptor, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; 32]);

/// Sends `fd` over `channel`, one message of one byte.
unsafe fn send_fd(channel: RawFd, fd: RawFd) -> std::io::Result<()> {
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control = Control([0; 32]);
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(size_of::<RawFd>() as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&raw const msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
        libc::CMSG_DATA(header).cast::<RawFd>().write_unaligned(fd);
        if libc::sendmsg(channel, &raw const msg, libc::MSG_NOSIGNAL) != 1 {
            return Err(last());
        }
        Ok(())
    }
}

/// Sends `errno` over `channel` in place of a descriptor, one message of 4 bytes.
unsafe fn send_errno(channel: RawFd, errno: i32) -> std::io::Result<()> {
    let bytes = errno.to_ne_bytes();
    unsafe {
        if libc::send(channel, bytes.as_ptr().cast(), 4, libc::MSG_NOSIGNAL) != 4 {
            return Err(last());
        }
    }
    Ok(())
}

/// Sends what the child made in place of a descriptor over `channel`: the descriptor
/// (closed here, sent or not, with [`send_fd`]) or the errno it had instead (with
/// [`send_errno`]). [`recv_fd_or_errno`] receives either.
unsafe fn send_fd_or_errno(channel: RawFd, made: Result<RawFd, i32>) -> std::io::Result<()> {
    unsafe {
        match made {
            Ok(fd) => {
                let sent = send_fd(channel, fd);
                libc::close(fd);
                sent
            }
            Err(errno) => send_errno(channel, errno),
        }
    }
}

/// Receives what [`send_fd_or_errno`] sent, without waiting: the descriptor, or
/// the error the child had in place of it.
pub(super) fn recv_fd_or_errno(channel: RawFd) -> std::io::Result<Result<OwnedFd, i32>> {
    let mut bytes = [0u8; 4];
    // SAFETY: a peek into a buffer of its size.
    let n = unsafe {
        libc::recv(
            channel,
            bytes.as_mut_ptr().cast(),
            4,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n == 4 {
        // SAFETY: the same message, taken.
        unsafe { libc::recv(channel, bytes.as_mut_ptr().cast(), 4, libc::MSG_DONTWAIT) };
        return Ok(Err(i32::from_ne_bytes(bytes)));
    }
    recv_fd(channel).map(Ok)
}

/// Receives one descriptor sent by [`send_fd`], without waiting.
pub(super) fn recv_fd(channel: RawFd) -> std::io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = Control([0; 32]);
    // SAFETY: msghdr is plain data; every pointer in it points at the locals above, which
    // outlive the call; the received descriptor is owned from here on.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        let flags = libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC;
        if libc::recvmsg(channel, &raw mut msg, flags) != 1 {
            return Err(last());
        }
        let header = libc::CMSG_FIRSTHDR(&raw const msg);
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(std::io::Error::from_raw_os_error(libc::EPROTO));
        }
        let fd = libc::CMSG_DATA(header).cast::<RawFd>().read_unaligned();
        Ok(OwnedFd::from_raw_fd(fd))
    }
}
