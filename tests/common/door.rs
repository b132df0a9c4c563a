//! What the door tests of the real clients share (issue 32, `LaunchContext::door`): a
//! stand-in kcap server that counts connections, a probe an MCP server's command runs
//! before the recorder (the kcap server through the URL it was given, and a direct
//! connection to the model API's port on the host), and a scan of the launch directory
//! for the daemon's key. Offline: everything is on 127.0.0.1.

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::stand_in::write_executable;

/// A stand-in kcap server on a free loopback port: answers every connection
/// `HTTP/1.0 200 OK` with body `ok`, and counts them.
pub struct KcapServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    reached: Arc<AtomicUsize>,
}

impl KcapServer {
    pub fn start() -> KcapServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let reached = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&reached);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || answer(stream));
            }
        });
        KcapServer { url, reached }
    }

    /// How many connections it got.
    pub fn reached(&self) -> usize {
        self.reached.load(Ordering::SeqCst)
    }
}

/// Reads one request head (up to its blank line, at most 5 s), then answers `200 ok`: the
/// request read first, so closing sends no reset that could cost the client the answer.
fn answer(stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line.trim_end() != "" {
        line.clear();
    }
    let _ = (&stream).write_all(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok");
}

/// Writes at `wrapper` a bash script that, run as an MCP server's command, leaves in
/// `marks` one file per probe and then runs `exec` (a shell command line, followed by the
/// script's arguments, with `PROBED_AS` set to the wrapper's path, which a recorder may
/// report as its command): `kcap-yes` when a `GET /` to `$KCAP_URL`'s host and port answers
/// `HTTP/1.0 200`, else `kcap-no`; `direct-yes` when a TCP connection to `127.0.0.1:<port of
/// model_api_url>` opens, else `direct-no`. Each file is named `<probe>-<answer>-<pid>`
/// ([`marks`] reads them).
pub fn write_probe(wrapper: &Path, marks: &Path, model_api_url: &str, exec: &str) {
    std::fs::create_dir_all(marks).unwrap();
    let api_port = model_api_url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    write_executable(
        wrapper,
        format!(
            "#!/bin/bash\n\
             trap '' PIPE\n\
             mark() {{ : > {marks}/$1-$2-$$; }}\n\
             hp=${{KCAP_URL#http://}}; hp=${{hp%%/*}}\n\
             if exec 3<>/dev/tcp/${{hp%:*}}/${{hp##*:}} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 \
                && read -r -t 5 line <&3 && [[ $line == HTTP/1.0\\ 200* ]]; then mark kcap yes; else mark kcap no; fi\n\
             exec 3>&-\n\
             if (exec 4<>/dev/tcp/127.0.0.1/{api_port}) 2>/dev/null; then mark direct yes; else mark direct no; fi\n\
             PROBED_AS=\"$0\" exec {exec} \"$@\"\n",
            marks = marks.display(),
        ),
    );
}

/// The probes' answers [`write_probe`] left in `marks` (`kcap-yes`, `direct-no`, …).
pub fn marks(marks: &Path) -> BTreeSet<String> {
    std::fs::read_dir(marks)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.rsplit_once('-').unwrap().0.to_owned()
        })
        .collect()
}

/// Every regular file under `dir` (recursively, symbolic links not followed) whose bytes
/// contain `needle`.
pub fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file()
                && std::fs::read(entry.path())
                    .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                found.push(entry.path());
            }
        }
    }
    found
}
