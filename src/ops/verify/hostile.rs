//! Writes the hostile configuration of one client for `verify`: the room's writer
//! ([`crate::clients::hostile::VerifySpec::hostile`]) run under a throwaway root, with the
//! credentials the launch hands over.

use std::path::Path;

use crate::clients::Client;
use crate::clients::hostile::{Source, Writer};
use crate::clients::root::{CredentialFile, Credentials};

/// What [`write`] set up beside the files.
pub(super) struct Hostile {
    /// Every server and hook declared.
    pub sources: Vec<Source>,
    /// The client's variables in the daemon's environment (on top of `HOME`, the XDG
    /// directories and leaked `KCAP_*` values every client gets).
    pub parent_env: Vec<(String, String)>,
    /// The credentials the launch hands over: dummy keys, the model API at a dead port.
    pub credentials: Credentials,
}

/// Writes the hostile files of `client` under `root` (`home/`, `xdg-config/`,
/// `parent/worktree/`, `parent/`, `extra/`), their servers and hooks running `recorder`,
/// with the writer of the client's room ([`crate::clients::hostile::VerifySpec::hostile`]). `None` for a client
/// `verify` has no hostile configuration for.
pub(super) fn write(
    client: Client,
    root: &Path,
    recorder: &Path,
) -> Option<std::io::Result<Hostile>> {
    let spec = client.spec().verify?;
    let mut w = Writer::new(root.to_owned(), recorder.to_string_lossy().into_owned());
    Some((spec.hostile)(&mut w).map(|(parent_env, env)| {
        let files = spec
            .credential_files
            .iter()
            .map(|&(name, contents)| CredentialFile {
                name: name.into(),
                contents: contents.into(),
            })
            .collect();
        Hostile {
            sources: w.into_sources(),
            parent_env,
            credentials: Credentials { env, files },
        }
    }))
}
