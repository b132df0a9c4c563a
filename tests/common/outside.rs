//! What a daemon holds outside its reviewers' reach, for the tests that attack the sandbox
//! from inside a reviewer (issue 31's red team): a listening pathname unix socket in a
//! `0700` directory of its own, and a System V shared memory segment (mode `0600`).

use std::os::unix::fs::DirBuilderExt as _;
use std::os::unix::net::UnixListener;
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
