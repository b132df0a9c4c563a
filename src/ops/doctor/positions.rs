//! Where a `doctor` finding points: the `line:column` of a server's name in a client's
//! file, of the block a missing server belongs in, or of what makes the file unusable.
//!
//! The file is parsed with the parsers of the loader models ([`crate::clients::loaded`]):
//! `jsonc-parser` with the options `install` reads the file with (so a syntax error points
//! where `install`'s sentence says), `toml`'s spanned document for Codex. Their spans are
//! byte ranges into the text without its byte order mark; nothing is searched for in the
//! text. A finding with nothing to point at (a file that cannot be read, a ledger of
//! another client) points at 1:1, as `check`'s drift findings do.

use super::FileRead;
use crate::clients::loaded::{self, Node, Span};
use crate::clients::registration::{RegistrationFormat, Syntax};
use crate::diagnostic::{Location, SourceText};

/// The start of a file: where a finding with no better place points.
pub(super) const START: Location = Location {
    line: 1,
    column: 1,
    end_line: 1,
    end_column: 1,
};

/// One client file, parsed for its positions.
pub(super) struct Positions {
    /// The text (without its byte order mark), indexed by line.
    text: SourceText,
    /// The parsed file, when it parses.
    root: Option<Node>,
    /// Where the file as a whole is wrong: a syntax error, a byte that is not UTF-8, a top
    /// level or block of the wrong type; else 1:1.
    file: Location,
    /// The key of the servers' block (`mcpServers`, `mcp`, `mcp_servers`).
    block: &'static str,
}

impl Positions {
    /// Parses `config`, a file of `format`.
    pub(super) fn of(format: &RegistrationFormat, config: &FileRead) -> Positions {
        let mut pos = Positions {
            text: SourceText::new(String::new()),
            root: None,
            file: START,
            block: format.block,
        };
        let FileRead::Bytes(bytes) = config else {
            return pos;
        };
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => crate::decode::strip_bom(text),
            Err(e) => {
                // Just past the valid start: where the first invalid byte is.
                let valid = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
                pos.text = SourceText::new(crate::decode::strip_bom(valid).to_string());
                pos.file = pos.point(pos.text.text().len());
                return pos;
            }
        };
        pos.text = SourceText::new(text.to_string());
        let parsed = match format.syntax {
            Syntax::Json {
                comments,
                trailing_commas,
            } => loaded::parse_json_syntax(text, 0, comments, trailing_commas),
            Syntax::Toml => loaded::parse_toml(text, 0),
        };
        match parsed {
            Ok(root) => {
                if root.entries().is_none() {
                    pos.file = pos.span(&root.span);
                } else if let Some(block) = root.get(format.block).filter(|b| b.entries().is_none())
                {
                    pos.file = pos.span(&block.span);
                }
                pos.root = Some(root);
            }
            Err((_, offset)) => pos.file = pos.point(offset),
        }
        pos
    }

    /// Where a finding about `server` (or about the scope itself when `None`) in `project`'s
    /// local scope of a `~/.claude.json` (the file's block when `None`) points:
    ///
    /// - a server the scope holds: its name (the last of a repeated one: the one the client
    ///   runs);
    /// - a server it does not hold (a missing one): the scope's block key, or 1:1 without
    ///   a block;
    /// - a project's scope itself: its `mcpServers` value;
    /// - the file itself: [`Positions::file`].
    pub(super) fn locate(&self, server: Option<&str>, project: Option<&str>) -> Location {
        let Some((key, block)) = self.scope(project) else {
            return match (server, project) {
                (None, None) => self.file,
                _ => START,
            };
        };
        match server {
            None if project.is_some() => self.span(&block.span),
            None => self.file,
            Some(name) => match block
                .entries()
                .and_then(|e| e.iter().find(|(n, _, _)| n == name))
            {
                Some((_, name_span, _)) => self.span(name_span),
                None => self.span(key),
            },
        }
    }

    /// The block of the user scope (`project` `None`) or of `project`'s local scope: its
    /// key's span and its value.
    fn scope(&self, project: Option<&str>) -> Option<(&Span, &Node)> {
        let root = self.root.as_ref()?;
        let parent = match project {
            None => root,
            Some(dir) => root.get("projects")?.get(dir)?,
        };
        parent
            .entries()?
            .iter()
            .find(|(k, _, _)| k == self.block)
            .map(|(_, key, value)| (key, value))
    }

    fn span(&self, span: &Span) -> Location {
        self.text.location(span.range.clone())
    }

    fn point(&self, offset: usize) -> Location {
        self.span(&Span {
            source: 0,
            range: offset..offset,
        })
    }
}

/// Where a finding about a ledger points: its syntax error, else 1:1.
pub(super) fn ledger(ledger: &FileRead) -> Location {
    let FileRead::Bytes(bytes) = ledger else {
        return START;
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return START;
    };
    match loaded::parse_json(text, 0) {
        Ok(_) => START,
        Err((_, offset)) => {
            let text = SourceText::new(text.to_string());
            let (line, column) = text.line_column(offset);
            Location {
                line,
                column,
                end_line: line,
                end_column: column,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Client;

    fn bytes(s: &str) -> FileRead {
        FileRead::Bytes(s.as_bytes().to_vec())
    }

    /// `(line, column, end_line, end_column)` of `locate(server, project)` in `text`, a file
    /// of `client`.
    fn at(
        client: Client,
        text: &str,
        server: Option<&str>,
        project: Option<&str>,
    ) -> (usize, usize, usize, usize) {
        let l = Positions::of(client.registration(), &bytes(text)).locate(server, project);
        (l.line, l.column, l.end_line, l.end_column)
    }

    #[test]
    fn a_server_is_its_key_and_a_missing_one_the_block_key() {
        let text =
            "{\n  \"mcpServers\": {\n    \"a\": {},\n    \"bé\": {\"command\": \"x\"}\n  }\n}\n";
        assert_eq!(at(Client::Cursor, text, Some("a"), None), (3, 5, 3, 8));
        assert_eq!(at(Client::Cursor, text, Some("bé"), None), (4, 5, 4, 9));
        assert_eq!(at(Client::Cursor, text, Some("zz"), None), (2, 3, 2, 15));
        assert_eq!(at(Client::Cursor, text, None, None), (1, 1, 1, 1));
        // No block at all: the start.
        assert_eq!(at(Client::Kiro, "{}", Some("a"), None), (1, 1, 1, 1));
    }

    #[test]
    fn jsonc_with_comments_a_byte_order_mark_and_a_repeated_name() {
        // Gemini CLI reads comments; the later of two `a` is the one it runs.
        let text = "\u{feff}{ // c\n  \"mcpServers\": {\"a\": 1, /* x */ \"a\": {}}\n}";
        assert_eq!(at(Client::Gemini, text, Some("a"), None), (2, 34, 2, 37));
        // OpenCode's block is `mcp`.
        let text = "{\n  \"mcp\": {\n    \"x\": {}, // trailing\n  },\n}";
        assert_eq!(at(Client::OpenCode, text, Some("x"), None), (3, 5, 3, 8));
    }

    #[test]
    fn codex_tables_point_at_the_name_in_the_header() {
        let text = "model = \"m\"\n\n[mcp_servers.kcap-flows]\ncommand = \"kcap\"\n\n[mcp_servers.\"x y\"]\nurl = \"http://h\"\n";
        assert_eq!(
            at(Client::Codex, text, Some("kcap-flows"), None),
            (3, 14, 3, 24)
        );
        assert_eq!(at(Client::Codex, text, Some("x y"), None), (6, 14, 6, 19));
        assert_eq!(at(Client::Codex, text, Some("gone"), None), (3, 2, 3, 13));
        let inline = "mcp_servers = { a = { command = \"k\" } }\n";
        assert_eq!(at(Client::Codex, inline, Some("a"), None), (1, 17, 1, 18));
    }

    #[test]
    fn claude_project_scopes() {
        let text = r#"{"mcpServers": {"k": {}},
 "projects": {
  "/p": {"mcpServers": {"k": {}}},
  "/q": {"mcpServers": []}
 }
}"#;
        assert_eq!(at(Client::Claude, text, Some("k"), None), (1, 17, 1, 20));
        assert_eq!(
            at(Client::Claude, text, Some("k"), Some("/p")),
            (3, 25, 3, 28)
        );
        // The scope itself: its value.
        assert_eq!(at(Client::Claude, text, None, Some("/q")), (4, 24, 4, 26));
        assert_eq!(
            at(Client::Claude, text, Some("k"), Some("/r")),
            (1, 1, 1, 1)
        );
    }

    #[test]
    fn what_makes_a_file_unusable() {
        // A syntax error: where the parser stops (install's sentence says the same).
        let text = "{\n  \"mcpServers\": {\n    \"a\": {},,\n";
        assert_eq!(at(Client::Claude, text, None, None), (3, 13, 3, 13));
        let toml = "[mcp_servers.a]\ncommand = \n";
        assert_eq!(at(Client::Codex, toml, None, None), (2, 11, 2, 11));
        // A block or top level of the wrong type: that value.
        assert_eq!(
            at(Client::Copilot, "{\"mcpServers\": [1]}", None, None),
            (1, 16, 1, 19)
        );
        assert_eq!(at(Client::Copilot, "\n[]", None, None), (2, 1, 2, 3));
        // A byte that is not UTF-8: where it is.
        let mut b = b"{\n  \"a\xc3\xa9".to_vec();
        b.push(0xff);
        let l = Positions::of(Client::Kiro.registration(), &FileRead::Bytes(b)).locate(None, None);
        assert_eq!((l.line, l.column), (2, 6));
        // Nothing to read: the start.
        let l = Positions::of(Client::Kiro.registration(), &FileRead::Missing).locate(None, None);
        assert_eq!(l, START);
    }

    #[test]
    fn a_ledger_points_at_its_syntax_error() {
        let l = ledger(&bytes("{\n \"entries\": {\"a\": 1,}\n}"));
        assert_eq!((l.line, l.column), (2, 21));
        assert_eq!(ledger(&bytes("{\"kcap-mcp-registry-ledger\": 2}")), START);
    }
}
