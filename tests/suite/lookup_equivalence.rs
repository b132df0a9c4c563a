//! `lookup` equals its specification on generated names: `str::trim`, then an ASCII
//! case-insensitive comparison with every id (the linear scan the benchmarks use as a
//! baseline). Pins the fast paths in `lookup` (no trim scan, no UTF-8 check) to that meaning.

use kcap_mcp_registry::{lookup, servers};
use proptest::prelude::*;

fn reference(name: &str) -> Option<&'static str> {
    let name = name.trim();
    servers()
        .iter()
        .find(|s| s.id.eq_ignore_ascii_case(name))
        .map(|s| s.id)
}

/// Padding drawn from ASCII and Unicode whitespace, and characters that are not whitespace
/// (U+001C..U+001F, U+200B) but look or behave like it.
fn padding() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        " ", "\t", "\n", "\r", "\u{b}", "\u{c}", "\u{85}", "\u{a0}", "\u{1680}", "\u{2000}",
        "\u{2028}", "\u{3000}", "\u{1c}", "\u{1f}", "\u{200b}", "\u{feff}",
    ]);
    prop::collection::vec(pieces, 0..3).prop_map(|p| p.concat())
}

/// A registry id with each ASCII letter's case flipped at random, sometimes with one byte
/// changed or a non-ASCII look-alike substituted.
fn name_like_an_id() -> impl Strategy<Value = String> {
    let ids: Vec<&'static str> = servers().iter().map(|s| s.id).collect();
    (
        prop::sample::select(ids),
        prop::collection::vec(any::<bool>(), 64),
        0usize..4,
        any::<prop::sample::Index>(),
    )
        .prop_map(|(id, flips, mutation, at)| {
            let mut s: String = id
                .chars()
                .zip(flips)
                .map(|(c, f)| if f { c.to_ascii_uppercase() } else { c })
                .collect();
            let i = at.index(s.len());
            match mutation {
                1 => s.replace_range(i..=i, "x"),
                2 => s.replace_range(i..=i, "\u{212a}"),
                3 => s.push('-'),
                _ => {}
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn lookup_matches_trim_and_ascii_case_insensitive_comparison(
        pre in padding(), name in name_like_an_id(), post in padding(),
    ) {
        let input = format!("{pre}{name}{post}");
        prop_assert_eq!(lookup(&input).map(|s| s.id), reference(&input), "{:?}", input);
    }

    #[test]
    fn lookup_matches_on_arbitrary_strings(input in "\\PC{0,80}") {
        prop_assert_eq!(lookup(&input).map(|s| s.id), reference(&input), "{:?}", input);
    }
}
