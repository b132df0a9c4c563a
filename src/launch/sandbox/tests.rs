//! Unit tests of the sandbox's judgment of a kernel (`launch::sandbox`): what it names as
//! missing for each Landlock ABI, and what the policies make of it. This machine's kernel
//! gives the whole sandbox, so the suite's refusal test
//! (`launch_sandbox::a_required_sandbox_the_kernel_lacks_is_refused_before_anything_is_created`)
//! cannot reach the refusal here; these reach it with the kernel's answers given.

use super::*;

#[test]
fn each_landlock_abi_below_the_sandboxs_is_named_with_what_it_lacks() {
    let none = missing_of(0, None, None).unwrap();
    assert!(
        none.starts_with("the Landlock LSM (not built in, or not enabled in `lsm=`)"),
        "{none}"
    );
    let old = missing_of(4, None, None).unwrap();
    assert_eq!(
        old,
        format!(
            "Landlock ABI {SANDBOX_ABI} (this kernel has ABI 4: no file-system rule for device \
             ioctls, no signal or abstract-socket scope)"
        )
    );
    let almost = missing_of(SANDBOX_ABI - 1, None, None).unwrap();
    assert!(
        almost.ends_with("no signal or abstract-socket scope)"),
        "{almost}"
    );
    assert_eq!(missing_of(SANDBOX_ABI, None, None), None);
    assert_eq!(missing_of(SANDBOX_ABI + 1, None, None), None);
}

#[test]
fn what_else_is_missing_is_named_beside_landlock() {
    let all = missing_of(
        0,
        Some("a /dev/pts of its own (errno 1)".into()),
        Some("a seccomp filter (x)".into()),
    )
    .unwrap();
    let parts: Vec<&str> = all.split("; ").collect();
    assert_eq!(parts.len(), 3, "{all}");
    assert!(parts[0].starts_with("the Landlock LSM"), "{all}");
    assert_eq!(
        parts[1..],
        ["a /dev/pts of its own (errno 1)", "a seccomp filter (x)"]
    );
    assert_eq!(
        missing_of(SANDBOX_ABI, None, Some("a seccomp filter (x)".into())).as_deref(),
        Some("a seccomp filter (x)")
    );
}

/// Issue 31, item 6: where the kernel cannot confine, the strict policy refuses naming what
/// is missing, the lenient one goes on (its caller warns, naming it: `launch`'s
/// `warning: the sandbox is partial: this kernel lacks …`), and off asks nothing.
#[test]
fn a_required_sandbox_is_refused_naming_what_the_kernel_lacks_and_best_effort_goes_on() {
    let lacks = missing_of(5, None, None);
    match refusal(Confinement::Required, lacks.clone()) {
        Err(ExecError::NoSandbox { missing }) => {
            assert_eq!(Some(missing), lacks);
        }
        other => panic!("{other:?}"),
    }
    assert!(refusal(Confinement::BestEffort, lacks.clone()).is_ok());
    assert!(refusal(Confinement::Off, lacks).is_ok());
    assert!(refusal(Confinement::Required, None).is_ok());
}
