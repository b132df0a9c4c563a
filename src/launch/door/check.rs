//! Before a door is made: what the kernel lacks for it ([`missing`]), the network a plan
//! names ([`of_plan`]), the endpoints a door cannot serve ([`preflight`]) and the dry run's
//! line ([`step`]).

use super::super::error::ExecError;
use super::super::userns;
use super::{Credential, Endpoint, MAX_ENDPOINTS, Network, Settings, http, tls};
use std::sync::OnceLock;

/// What this kernel lacks for the door, for this user; `None` when it gives it. Found by
/// trying once (a forked process calls `unshare(CLONE_NEWUSER | CLONE_NEWNET)` and exits),
/// and remembered.
pub fn missing() -> Option<String> {
    static FOUND: OnceLock<Option<String>> = OnceLock::new();
    FOUND.get_or_init(probe).clone()
}

fn probe() -> Option<String> {
    // SAFETY: the step is one system call.
    let tried = unsafe {
        userns::probe(|| {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    };
    let errno = match tried {
        Ok(()) => return None,
        Err(userns::Trial::NoProcess(why)) => {
            return Some(format!("a process to try the namespaces in ({why})"));
        }
        Err(userns::Trial::Refused(errno)) => errno,
    };
    let why = match errno {
        libc::EPERM => {
            "user and network namespaces for this user (unshare is refused with EPERM: \
             `kernel.unprivileged_userns_clone`, `kernel.apparmor_restrict_unprivileged_userns` \
             or a container's seccomp filter forbids them)"
        }
        libc::ENOSPC => {
            "user and network namespaces for this user (unshare is refused with ENOSPC: \
             `user.max_user_namespaces` or `user.max_net_namespaces` is 0 or reached)"
        }
        libc::EINVAL => {
            "user and network namespaces (a kernel without CONFIG_USER_NS or CONFIG_NET_NS)"
        }
        _ => "user and network namespaces (unshare is refused)",
    };
    Some(format!(
        "{why}; errno {errno}: {}",
        std::io::Error::from_raw_os_error(errno)
    ))
}

/// The reviewer's network for `plan` under `options`: the plan's door
/// ([`LaunchPlan::door`](crate::clients::plan::LaunchPlan::door)) when it names one, else
/// [`Options::network`](super::super::Options::network).
///
/// # Errors
/// [`ExecError::BadDoor`] when both name a door: which one holds would be a guess.
pub(crate) fn of_plan(
    plan: &crate::clients::plan::LaunchPlan,
    options: &super::super::Options,
) -> Result<Network, ExecError> {
    let Some(door) = &plan.door else {
        return Ok(options.network.clone());
    };
    if options.network != Network::Open {
        return Err(ExecError::BadDoor {
            problem: "is named by the plan and by the executor's options; name it in one".into(),
        });
    }
    Ok(Network::Door(
        door.endpoints
            .iter()
            .map(|e| {
                let mut endpoint = Endpoint::new(e.port, e.upstream.clone());
                endpoint.tls = e.scheme == crate::clients::plan::DoorScheme::Https;
                match &e.credential {
                    Some(c) => endpoint.with_credential(Credential::new(&c.header, &c.value)),
                    None => endpoint,
                }
            })
            .collect(),
    ))
}

/// Refuses, before anything is created, endpoints the door cannot serve
/// ([`ExecError::BadDoor`]: TLS to a host that is no name, no root certificate) and a kernel
/// that does not give the namespaces ([`ExecError::NoDoor`]).
pub(crate) fn preflight(network: &Network, settings: &Settings) -> Result<(), ExecError> {
    let Network::Door(endpoints) = network else {
        return Ok(());
    };
    let bad = |problem: String| Err(ExecError::BadDoor { problem });
    if endpoints.is_empty() {
        return bad("names no endpoint (a door with none is a closed network: name one)".into());
    }
    if endpoints.len() > MAX_ENDPOINTS {
        return bad(format!(
            "names {} endpoints; at most {MAX_ENDPOINTS}",
            endpoints.len()
        ));
    }
    for (i, e) in endpoints.iter().enumerate() {
        if e.port == 0 {
            return bad(format!(
                "endpoint to {:?} has port 0; give a fixed port",
                e.upstream
            ));
        }
        if endpoints[..i].iter().any(|o| o.port == e.port) {
            return bad(format!("has port {} twice", e.port));
        }
        match e.upstream.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {}
            _ => {
                return bad(format!(
                    "endpoint {}: upstream {:?} is not host:port",
                    e.port, e.upstream
                ));
            }
        }
        if e.tls
            && let Err(why) = tls::server_name(&e.upstream)
        {
            return bad(format!(
                "endpoint {}: upstream {:?} over TLS: {why}",
                e.port, e.upstream
            ));
        }
        if let Some(c) = &e.credential
            && !http::valid_header(&c.header, &c.value)
        {
            return bad(format!(
                "endpoint {}: the credential's header {:?} is not a header name, or its value \
                 holds a control character",
                e.port, c.header
            ));
        }
    }
    if endpoints.iter().any(|e| e.tls)
        && let Err(why) = tls::config(&settings.extra_roots)
    {
        return bad(format!("has a TLS upstream and {why}"));
    }
    match missing() {
        Some(missing) => Err(ExecError::NoDoor { missing }),
        None => Ok(()),
    }
}

/// The dry run's line for `network` ([`crate::launch::steps`]): none for an open network.
pub(crate) fn step(network: &Network) -> Option<String> {
    let Network::Door(endpoints) = network else {
        return None;
    };
    let list: Vec<String> = endpoints
        .iter()
        .map(|e| {
            let tls = if e.tls { " over TLS" } else { "" };
            match &e.credential {
                Some(c) => format!(
                    "127.0.0.1:{} to {}{tls} (sets the daemon's {} on each request)",
                    e.port, e.upstream, c.header
                ),
                None => format!("127.0.0.1:{} to {}{tls}", e.port, e.upstream),
            }
        })
        .collect();
    Some(format!(
        "give it a network namespace of its own (and a user namespace), loopback only, whose \
         only way out is the door: {}",
        list.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::super::{Endpoint, Network, Settings};
    use super::*;

    fn refused(endpoints: Vec<Endpoint>) -> String {
        match preflight(&Network::Door(endpoints), &Settings::default()) {
            Err(ExecError::BadDoor { problem }) => problem,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn endpoints_the_door_cannot_serve_are_refused_naming_the_fault() {
        assert!(refused(vec![]).starts_with("names no endpoint"));
        let e = |p, u: &str| Endpoint::new(p, u);
        assert_eq!(
            refused(vec![e(0, "127.0.0.1:80")]),
            "endpoint to \"127.0.0.1:80\" has port 0; give a fixed port"
        );
        assert_eq!(
            refused(vec![e(8080, "a:1"), e(8080, "b:2")]),
            "has port 8080 twice"
        );
        for upstream in ["127.0.0.1", ":443", "api.example:0", "api.example:https"] {
            assert!(
                refused(vec![e(8080, upstream)]).contains("is not host:port"),
                "{upstream}"
            );
        }
        assert!(
            refused(vec![e(8080, "bad_host!:443").over_tls()])
                .contains("over TLS: \"bad_host!\" is neither a DNS name nor an IP address"),
        );
        let many = (1..=17).map(|p| e(p, "127.0.0.1:1")).collect();
        assert_eq!(refused(many), "names 17 endpoints; at most 16");
        assert!(preflight(&Network::Open, &Settings::default()).is_ok());
    }

    #[test]
    fn the_error_says_what_the_kernel_lacks_and_how_to_go_on() {
        let e = ExecError::NoDoor {
            missing: "user and network namespaces for this user".into(),
        };
        let text = e.to_string();
        assert!(
            text.starts_with("check the plan: the reviewer's network door needs user"),
            "{text}"
        );
        assert!(text.contains("launch with an open network"), "{text}");
    }
}
