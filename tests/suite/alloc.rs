//! `lookup` and allowlist resolution allocate nothing, counted by a global allocator.
//!
//! The counter is per thread (tests in this binary run in parallel threads), and counts
//! `alloc`, `alloc_zeroed` and `realloc` calls made by the measured closure only. Inputs are
//! built before counting starts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kcap_mcp_registry::{LaunchContext, Policy, SkipKind, lookup, resolve_allowlist};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the allocator may run while this thread's locals are being torn down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every method forwards to `System` unchanged; counting touches only a `Cell`.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result with the number of allocations it made on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = std::hint::black_box(f());
    let after = ALLOCATIONS.with(Cell::get);
    (out, after - before)
}

/// A flow's allowlist as a config would hold it: four real ids in mixed case and padding, a
/// flow-starting server (stripped by the recursion guard), a duplicate and the result channel.
const ALLOWLIST_7: [Option<&str>; 7] = [
    Some(" KCAP-Review "),
    Some("kcap-sessions"),
    Some("Kcap-Analytics\t"),
    Some("kcap-flows"),
    Some("\u{a0}kcap-memory"),
    Some("kcap-review"),
    Some("kcap-flow-result"),
];

#[test]
fn the_counter_sees_allocations() {
    let (b, n) = allocations(|| Box::new([0u8; 64]));
    assert_eq!(b.len(), 64);
    assert_eq!(n, 1);
    let (s, n) = allocations(|| " KCAP-Review ".trim().to_lowercase());
    assert_eq!(s, "kcap-review");
    assert!(n >= 1, "to_lowercase allocates, counted {n}");
}

#[test]
fn lookup_allocates_nothing_on_hits_and_misses() {
    let inputs = [
        ("kcap-review", Some("kcap-review")),
        ("  KCAP-Sessions\t", Some("kcap-sessions")),
        ("\u{a0}Kcap-Flow-Result\u{3000}", Some("kcap-flow-result")),
        ("kcap-reviex", None),
        (
            "kcap-review-but-much-longer-than-any-id-in-the-registry-so-refused",
            None,
        ),
        ("KCAP-REV\u{130}EW", None),
        ("   ", None),
    ];
    for (name, expected) in inputs {
        let (found, n) = allocations(|| lookup(name));
        assert_eq!(found.map(|s| s.id), expected, "{name:?}");
        assert_eq!(n, 0, "lookup({name:?}) allocated {n} times");
    }
}

#[test]
fn resolving_a_seven_entry_allowlist_allocates_nothing() {
    let ((ids, skipped), n) = allocations(|| {
        let r = resolve_allowlist(&ALLOWLIST_7, Policy::Lenient).expect("lenient");
        // Walk the servers and the lazily computed diagnostics inside the count, into
        // fixed-size arrays so collecting allocates nothing either.
        let mut ids = [""; 7];
        for (slot, s) in ids.iter_mut().zip(r.servers()) {
            *slot = s.id;
        }
        let mut skipped = [(0, SkipKind::Blank); 3];
        let mut count = 0;
        for (slot, s) in skipped.iter_mut().zip(r.skipped()) {
            *slot = (s.index, s.kind);
            count += 1;
        }
        assert_eq!(count, 3);
        (ids, skipped)
    });
    assert_eq!(
        ids,
        [
            "kcap-review",
            "kcap-sessions",
            "kcap-analytics",
            "kcap-memory",
            "",
            "",
            ""
        ]
    );
    assert_eq!(
        skipped,
        [
            (3, SkipKind::StartsFlows),
            (5, SkipKind::Duplicate),
            (6, SkipKind::Reserved)
        ]
    );
    assert_eq!(n, 0, "resolution allocated {n} times");
}

#[test]
fn strict_resolution_of_read_only_servers_allocates_nothing() {
    let list = [
        Some("kcap-review"),
        Some(" KCAP-SESSIONS "),
        Some("kcap-analytics"),
        Some("kcap-review"),
        Some("kcap-flow-result"),
        Some("Kcap-Sessions"),
        Some("KCAP-ANALYTICS"),
    ];
    let (len, n) = allocations(|| {
        resolve_allowlist(&list, Policy::Strict)
            .expect("read-only servers pass the strict policy")
            .servers()
            .len()
    });
    assert_eq!(len, 3);
    assert_eq!(n, 0, "strict resolution allocated {n} times");
}

#[test]
fn resolving_a_launch_context_allowlist_allocates_nothing() {
    let ctx = LaunchContext {
        mcp_allowlist: Some(ALLOWLIST_7.iter().map(|e| e.map(str::to_string)).collect()),
        ..LaunchContext::default()
    };
    let (len, n) = allocations(|| {
        ctx.resolve(Policy::Lenient)
            .expect("lenient")
            .servers()
            .len()
    });
    assert_eq!(len, 4);
    assert_eq!(n, 0, "LaunchContext::resolve allocated {n} times");
}
