//! `validate_dir` on registries large enough to be read and checked on several threads, and
//! on a file larger than the buffer `load_dir` reads into first: the result must be what a
//! one-file-at-a-time check gives (diagnostics in file order, every file read whole).
#![cfg(feature = "validate")]

use crate::synthetic;

use kcap_mcp_registry::schema::{CheckError, Rule, load_dir, validate};
use kcap_mcp_registry::validate_dir;

#[test]
fn diagnostics_of_a_large_registry_come_in_file_order() {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_registry(1500, dir.path()).unwrap();
    // Break three files far apart in sort order, each with a different rule, and add a
    // case-insensitive duplicate of an early id at the end.
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let (a, b, c) = (&files[3], &files[750], &files[1490]);
    let edit = |path: &std::path::Path, from: &str, to: &str| {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.contains(from), "{from:?} in {}", path.display());
        std::fs::write(path, text.replacen(from, to, 1)).unwrap();
    };
    edit(a, "starts_flows", "start_flows");
    edit(b, "args = [\"mcp\"", "args = [\"\"");
    edit(c, "KCAP_URL", "kcap_url");
    let first_id = files[0].file_stem().unwrap().to_str().unwrap().to_owned();
    std::fs::write(
        dir.path().join("zzz-duplicate.toml"),
        std::fs::read_to_string(&files[0]).unwrap().replace(
            &format!("id = \"{first_id}\""),
            &format!("id = \"{}\"", first_id.to_uppercase()),
        ),
    )
    .unwrap();

    let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
        panic!("the registry should be invalid");
    };
    let got: Vec<(String, Rule)> = diags
        .iter()
        .map(|d| (d.path.rsplit('/').next().unwrap().to_owned(), d.rule))
        .collect();
    let name = |p: &std::path::Path| p.file_name().unwrap().to_str().unwrap().to_owned();
    assert_eq!(
        got,
        [
            (name(a), Rule::UnknownKey),
            (name(b), Rule::ArgsFormat),
            (name(c), Rule::EnvName),
            ("zzz-duplicate.toml".to_owned(), Rule::IdCanonical),
            ("zzz-duplicate.toml".to_owned(), Rule::IdUnique),
        ]
    );
}

#[test]
fn a_large_valid_registry_validates_to_sorted_entries() {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_registry(1200, dir.path()).unwrap();
    let loaded = load_dir(dir.path()).unwrap();
    let files = &loaded.files;
    assert_eq!(files.len(), 1201);
    assert!(files.windows(2).all(|w| w[0].path < w[1].path));
    let entries = validate(&loaded, "reg").unwrap();
    assert_eq!(entries.len(), 1201);
    assert!(entries.windows(2).all(|w| w[0].id < w[1].id));
    for (file, bytes) in files
        .iter()
        .zip(files.iter().map(|f| std::fs::read(&f.path).unwrap()))
    {
        assert_eq!(file.bytes, bytes, "{}", file.path);
    }
}

#[test]
fn a_registry_file_larger_than_the_read_buffer_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_registry(1, dir.path()).unwrap();
    // 40 KiB of comments before the keys, and a tool after them.
    let padding = "# padding padding padding padding padding padding padding padding\n".repeat(620);
    let text = format!(
        "{padding}{}\n[[tools]]\nname = \"last_tool\"\nunattended_safe = true\n",
        synthetic::RESULT_CHANNEL
    );
    assert!(text.len() > 40_000);
    std::fs::write(dir.path().join("kcap-flow-result.toml"), &text).unwrap();
    let loaded = load_dir(dir.path()).unwrap();
    let rc = loaded
        .files
        .iter()
        .find(|f| f.stem == "kcap-flow-result")
        .unwrap();
    assert_eq!(rc.bytes, text.as_bytes());
    let entries = validate(&loaded, "reg").unwrap();
    let rc = entries.iter().find(|e| e.id == "kcap-flow-result").unwrap();
    assert_eq!(rc.tools.last().unwrap().name, "last_tool");
}
