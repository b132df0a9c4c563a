//! `lookup` against the two obvious alternatives, measured in the same run:
//!
//! - `hashmap_to_lowercase`: a `HashMap<String, &McpServer>` keyed by lower-case id, looked
//!   up with `name.trim().to_lowercase()` (one allocation per call);
//! - `linear_scan`: `servers().iter().find(|s| s.id.eq_ignore_ascii_case(name.trim()))`.
//!
//! Four inputs: an exact hit, a mixed-case and padded hit, a miss of a valid length, and a
//! miss longer than any id. The ids come from `servers()`, so the bench also runs against a
//! synthetic registry (`KCAP_MCP_REGISTRY_DIR=… cargo bench --bench lookup`, see
//! `scripts/bench.sh`). Every input's expected result is asserted before measuring.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use kcap_mcp_registry::{McpServer, lookup, servers};

/// The benchmark inputs for the compiled-in registry, with the id each hit must find.
struct Inputs {
    /// The id the hits must resolve to.
    target: &'static str,
    hit_exact: String,
    hit_mixed_padded: String,
    miss_valid_length: String,
    miss_too_long: String,
}

fn inputs() -> Inputs {
    let all = servers();
    // The middle id: neither the first nor the last in sort order, and for the bundled
    // registry a real allowlist name (`kcap-memory`).
    let target = all[all.len() / 2].id;
    let hit_mixed_padded = format!(
        "  {}\t",
        target
            .chars()
            .enumerate()
            .map(|(i, c)| if i % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c
            })
            .collect::<String>()
    );
    // Same length as the target, not an id: change the last letter until nothing matches.
    let miss_valid_length = (b'a'..=b'z')
        .map(|last| {
            let mut s = target[..target.len() - 1].to_string();
            s.push(char::from(last));
            s
        })
        .find(|s| all.iter().all(|srv| srv.id != s))
        .expect("26 candidates cannot all be ids");
    let longest = all.iter().map(|s| s.id.len()).max().unwrap_or(0);
    let miss_too_long = format!("{target}{}", "x".repeat(longest + 1 - target.len()));
    Inputs {
        target,
        hit_exact: target.to_string(),
        hit_mixed_padded,
        miss_valid_length,
        miss_too_long,
    }
}

fn bench_lookup(c: &mut Criterion) {
    let inputs = inputs();
    let map: HashMap<String, &'static McpServer> =
        servers().iter().map(|s| (s.id.to_lowercase(), s)).collect();
    let by_map = |name: &str| map.get(&name.trim().to_lowercase()).copied();
    let by_scan = |name: &str| {
        let name = name.trim();
        servers().iter().find(|s| s.id.eq_ignore_ascii_case(name))
    };

    let cases = [
        ("hit_exact", &inputs.hit_exact, Some(inputs.target)),
        (
            "hit_mixed_padded",
            &inputs.hit_mixed_padded,
            Some(inputs.target),
        ),
        ("miss_valid_length", &inputs.miss_valid_length, None),
        ("miss_too_long", &inputs.miss_too_long, None),
    ];
    println!(
        "registry: {} entries; inputs: {:?}",
        servers().len(),
        cases.map(|(name, input, _)| (name, input.as_str()))
    );
    for (case, input, expected) in cases {
        // The three implementations agree on every input before anything is timed.
        assert_eq!(lookup(input).map(|s| s.id), expected, "lookup({input:?})");
        assert_eq!(by_map(input).map(|s| s.id), expected, "map({input:?})");
        assert_eq!(by_scan(input).map(|s| s.id), expected, "scan({input:?})");

        let mut group = c.benchmark_group(format!("lookup/{case}"));
        group.bench_function("phf_lookup", |b| {
            b.iter(|| lookup(black_box(input.as_str())))
        });
        group.bench_function("hashmap_to_lowercase", |b| {
            b.iter(|| by_map(black_box(input.as_str())))
        });
        group.bench_function("linear_scan", |b| {
            b.iter(|| by_scan(black_box(input.as_str())))
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    // 12 benchmarks × (1 s warm-up + 2 s measurement): under a minute per registry size.
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = bench_lookup
}
criterion_main!(benches);
