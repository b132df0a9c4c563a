//! What a daemon holds outside its reviewers' reach, for the tests that attack the sandbox
//! from inside a reviewer (issue 31's red team): a listening pathname unix socket in a
//! `0700` directory of its own (a stream socket and a datagram socket), and a System V
//! shared memory segment (mode `0600`).

use std::os::unix::fs::DirBuilderExt as _;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};

/// A daemon's control socket, `<root>/daemon/control.sock` (the directory made `0700`),
/// listening while this lives.
pub struct DaemonSocket {
    /// The socket's path.
    pub path: PathBuf,
    _listener: UnixListener,
}

impl DaemonSocket {
    /// Makes `<root>/daemon` (mode `0700`) and listens on `control.sock` there.
    pub fn bind(root: &Path) -> DaemonSocket {
        let private = root.join("daemon");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .unwrap();
        let path = private.join("control.sock");
        let listener = UnixListener::bind(&path).unwrap();
        DaemonSocket {
            path,
            _listener: listener,
        }
    }
}

/// A daemon's datagram socket (a log or notification socket, as journald's and systemd's
/// `NOTIFY_SOCKET` are), `<root>/daemon-dgram/notify.sock` (the directory made `0700`),
/// bound while this lives.
pub struct DaemonDatagram {
    /// The socket's path.
    pub path: PathBuf,
    socket: UnixDatagram,
}

impl DaemonDatagram {
    /// Makes `<root>/daemon-dgram` (mode `0700`) and binds `notify.sock` there.
    pub fn bind(root: &Path) -> DaemonDatagram {
        let private = root.join("daemon-dgram");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .unwrap();
        let path = private.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket.set_nonblocking(true).unwrap();
        DaemonDatagram { path, socket }
    }

    /// Every datagram received so far, each lossily as text.
    pub fn received(&self) -> Vec<String> {
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = self.socket.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        got
    }
}

/// A System V shared memory segment of the daemon's (mode `0600`, 4096 bytes) holding a
/// text; removed on drop.
pub struct Segment {
    /// Its key: the base given plus this process's id (its low 16 bits), so that test
    /// processes running at once do not collide.
    pub key: i32,
    id: i32,
}

impl Segment {
    /// A new segment of key `base` + this process's id (low 16 bits) holding `text`.
    pub fn new(base: i32, text: &[u8]) -> Segment {
        let key = base + i32::try_from(std::process::id() & 0xffff).unwrap();
        // SAFETY: shmget/shmat/shmdt on a segment of this process's; the copy stays in it.
        unsafe {
            let id = libc::shmget(key, 4096, libc::IPC_CREAT | libc::IPC_EXCL | 0o600);
            assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
            let at = libc::shmat(id, std::ptr::null(), 0);
            assert_ne!(at as isize, -1);
            std::ptr::copy_nonoverlapping(text.as_ptr(), at.cast::<u8>(), text.len());
            libc::shmdt(at);
            Segment { key, id }
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: removes the segment made in `new`.
        unsafe { libc::shmctl(self.id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// A key of the calling thread's session keyring: the thread joins a new anonymous session
/// keyring (`KEYCTL_JOIN_SESSION_KEYRING`, so that no test touches the keyring of the
/// session it runs in) and adds a `user` key there (`add_key`); the processes it starts
/// inherit that keyring (keyrings(7)). Nothing to undo: the keyring goes with the thread's
/// credentials.
pub struct SessionKey {
    /// The key's description, the name it is found by.
    pub description: &'static str,
    /// Its payload.
    pub value: &'static str,
}

impl SessionKey {
    /// Joins a new session keyring and adds `description` holding `value` there.
    pub fn join_and_add(description: &'static str, value: &'static str) -> SessionKey {
        let desc = std::ffi::CString::new(description).unwrap();
        // SAFETY: keyctl and add_key on buffers alive for the calls.
        unsafe {
            let ring = libc::syscall(
                libc::SYS_keyctl,
                libc::c_long::from(libc::KEYCTL_JOIN_SESSION_KEYRING),
                std::ptr::null::<libc::c_char>(),
            );
            assert!(ring >= 0, "keyctl: {}", std::io::Error::last_os_error());
            let key = libc::syscall(
                libc::SYS_add_key,
                c"user".as_ptr(),
                desc.as_ptr(),
                value.as_ptr(),
                value.len(),
                libc::c_long::from(libc::KEY_SPEC_SESSION_KEYRING),
            );
            assert!(key >= 0, "add_key: {}", std::io::Error::last_os_error());
        }
        SessionKey { description, value }
    }
}
