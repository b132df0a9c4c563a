//! The per-launch values a plan is made with ([`LaunchId`], [`LaunchSecret`]): drawn from the
//! operating system's CSPRNG for every real launch. Re-exported from [`plan`](super::plan).

use std::fmt;

use crate::model::McpServer;

/// A per-launch random value: 64 bits from the operating system's CSPRNG, written as 16
/// lowercase hex digits. It aliases the names of injected servers ([`LaunchId::alias`]) for
/// clients whose MCP gate a same-named server of the reviewed repository could pass.
///
/// It has no `Default`, no `From` and no `Deserialize`: a caller gets one only from
/// [`LaunchId::random`] (every real launch) or, for reproducible output and tests, by
/// spelling it out with [`LaunchId::from_hex`]. Its `Debug` form hides the value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct LaunchId([u8; LaunchId::BYTES]);

impl LaunchId {
    /// Bytes of randomness: 8 (64 bits). Long enough to be unguessable for one launch; the
    /// registry rule `tool-name-length` keeps every qualified tool name an aliasing client
    /// builds with it (`mcp_<stem>-<16 hex>_<tool>` on Gemini) within that client's limit,
    /// the stem being the server's `alias` or its id ([`LaunchId::wire_name`]).
    pub const BYTES: usize = 8;

    /// Length of [`LaunchId::hex`]: 16 ([`LAUNCH_ID_HEX_LEN`](crate::LAUNCH_ID_HEX_LEN),
    /// which the registry rules use).
    pub const HEX_LEN: usize = 2 * LaunchId::BYTES;

    /// A fresh id from the operating system's CSPRNG (`getrandom`).
    ///
    /// # Errors
    /// The OS randomness source failed; the launch must not go ahead without an id.
    pub fn random() -> Result<LaunchId, LaunchIdError> {
        random_bytes().map(LaunchId)
    }

    /// The id spelled as exactly 16 hex digits (either case), for reproducible output and
    /// tests (`render --launch-id`). Never build it from launch data: a value a reviewed
    /// repository can predict defeats the aliasing.
    ///
    /// # Errors
    /// [`LaunchIdError::Hex`] when `hex` is not 16 hex digits.
    ///
    /// ```
    /// use kcap_mcp_registry::clients::plan::LaunchId;
    ///
    /// let id = LaunchId::from_hex("00112233AABBCCDD").unwrap();
    /// assert_eq!(id.hex(), "00112233aabbccdd");
    /// assert_eq!(id.alias("kcap-review"), "kcap-review-00112233aabbccdd");
    /// assert!(LaunchId::from_hex("0011").is_err());
    /// ```
    pub fn from_hex(hex: &str) -> Result<LaunchId, LaunchIdError> {
        let bad = || LaunchIdError::Hex(hex.to_owned());
        // `from_str_radix` alone would take a sign (`+1`).
        if hex.len() != LaunchId::HEX_LEN || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut bytes = [0; LaunchId::BYTES];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(LaunchId(bytes))
    }

    /// The id as 16 lowercase hex digits.
    pub fn hex(&self) -> String {
        lower_hex(&self.0)
    }

    /// `<name>-<hex>`: `name` aliased for this launch. A server's wire name is
    /// [`LaunchId::wire_name`], which picks the stem.
    pub fn alias(&self, name: &str) -> String {
        format!("{name}-{}", self.hex())
    }

    /// The wire name of `server` for this launch on every client that aliases server names
    /// (Gemini CLI): `<stem>-<hex>`, the stem being the registry's `alias` for the server
    /// when it has one, else its id ([`McpServer::alias_stem`]). Registry rule
    /// `tool-name-length` guarantees that every tool's qualified name fits each aliasing
    /// client's limit with this name.
    ///
    /// ```
    /// use kcap_mcp_registry::{clients::plan::LaunchId, lookup};
    ///
    /// let id = LaunchId::from_hex("0123456789abcdef").unwrap();
    /// let review = lookup("kcap-review").unwrap();
    /// assert_eq!(id.wire_name(review), "kcap-review-0123456789abcdef");
    /// let context = lookup("kcap-review-context").unwrap();
    /// assert_eq!(id.wire_name(context), "kcap-rcx-0123456789abcdef");
    /// ```
    pub fn wire_name(&self, server: &McpServer) -> String {
        self.alias(server.alias_stem())
    }
}

// The registry rules size names with the same suffix length.
const _: () = assert!(LaunchId::HEX_LEN == crate::model::LAUNCH_ID_HEX_LEN);

impl fmt::Debug for LaunchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LaunchId(…)")
    }
}

/// A per-launch secret: 16 bytes (128 bits) from the operating system's CSPRNG, given as 32
/// hex digits: the password of a client's own local server (OpenCode's
/// `OPENCODE_SERVER_PASSWORD`), so that no other local user can drive it. Like
/// [`LaunchId`], it has no `Default`, no `From` and no `Deserialize`, and its `Debug` form
/// hides the value.
#[derive(Clone, PartialEq, Eq)]
pub struct LaunchSecret([u8; 16]);

impl LaunchSecret {
    /// A fresh secret from the operating system's CSPRNG (`getrandom`).
    ///
    /// # Errors
    /// The OS randomness source failed; the launch must not go ahead without one.
    pub fn random() -> Result<LaunchSecret, LaunchIdError> {
        random_bytes().map(LaunchSecret)
    }

    /// These bytes as the secret, for reproducible output and tests only: a secret anyone can
    /// predict protects nothing.
    pub fn from_bytes(bytes: [u8; 16]) -> LaunchSecret {
        LaunchSecret(bytes)
    }

    /// The secret as 32 lower-case hex digits.
    pub fn hex(&self) -> String {
        lower_hex(&self.0)
    }
}

impl fmt::Debug for LaunchSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LaunchSecret(…)")
    }
}

/// `N` bytes from the operating system's CSPRNG (`getrandom`): a [`LaunchId`]'s or a
/// [`LaunchSecret`]'s.
fn random_bytes<const N: usize>() -> Result<[u8; N], LaunchIdError> {
    let mut bytes = [0; N];
    getrandom::fill(&mut bytes).map_err(|e| LaunchIdError::Random(e.to_string()))?;
    Ok(bytes)
}

/// `bytes` as lower-case hex digits, two per byte.
fn lower_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A [`LaunchId`] or a [`LaunchSecret`] could not be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchIdError {
    /// The OS CSPRNG failed (the error's text).
    Random(String),
    /// The text given to [`LaunchId::from_hex`] is not 16 hex digits.
    Hex(String),
}

impl fmt::Display for LaunchIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchIdError::Random(e) => write!(
                f,
                "cannot draw a launch id from the operating system's random source: {e}"
            ),
            LaunchIdError::Hex(s) => write!(
                f,
                "launch id \"{}\" is not {} hex digits; give e.g. 0123456789abcdef",
                s.escape_debug(),
                LaunchId::HEX_LEN
            ),
        }
    }
}

impl std::error::Error for LaunchIdError {}
