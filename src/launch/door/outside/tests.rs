use super::*;

/// An IPv4 packet from the tun's address to `to` of `protocol` carrying `data`, its header's
/// checksum set.
fn v4(to: [u8; 4], protocol: u8, data: &[u8]) -> Vec<u8> {
    let total = u16::try_from(20 + data.len()).unwrap();
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, protocol, 0, 0]);
    p.extend_from_slice(&TUN_V4.octets());
    p.extend_from_slice(&to);
    let sum = checksum(0, &p);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p.extend_from_slice(data);
    p
}

fn v6(to: Ipv6Addr, next: u8, data: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes());
    p.extend_from_slice(&[next, 64]);
    p.extend_from_slice(&TUN_V6.octets());
    p.extend_from_slice(&to.octets());
    p.extend_from_slice(data);
    p
}

/// A TCP header to `port` with `flags`.
fn tcp(port: u16, flags: u8) -> Vec<u8> {
    let mut t = vec![0xc3, 0x50];
    t.extend_from_slice(&port.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 7, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    t
}

/// A DNS query for `name` in a UDP datagram to port 53.
fn dns(name: &[&[u8]]) -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name {
        q.push(u8::try_from(label.len()).unwrap());
        q.extend_from_slice(label);
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    let mut u = vec![0xc3, 0x51, 0, 53];
    u.extend_from_slice(&u16::try_from(8 + q.len()).unwrap().to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(&q);
    u
}

/// A name as the door logs it whole.
fn whole(name: &str) -> QueryName {
    QueryName {
        shown: name.into(),
        cut_of: None,
        compressed: false,
    }
}

/// A DNS query's message whose first question's name is `name`, the bytes after the header
/// as they are (labels, then the end or a pointer), then type A, class IN.
fn query(name: &[u8]) -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(name);
    q.extend_from_slice(&[0, 1, 0, 1]);
    q
}

#[test]
fn a_connection_out_over_ipv4_is_named_and_answered_administratively_prohibited() {
    let syn = v4([203, 0, 113, 7], 6, &tcp(443, 0x02));
    let (tried, reply) = judge(&syn).unwrap();
    assert_eq!(tried, Tried::Tcp("203.0.113.7:443".parse().unwrap()));
    assert_eq!(tried.to_string(), "a TCP connection to 203.0.113.7:443");
    // An IPv4 header from the address tried back to the tun's, its checksum right.
    assert_eq!(reply[0], 0x45);
    assert_eq!(
        usize::from(u16::from_be_bytes([reply[2], reply[3]])),
        reply.len()
    );
    assert_eq!(reply[9], 1, "ICMP");
    assert_eq!(reply[12..16], [203, 0, 113, 7]);
    assert_eq!(reply[16..20], TUN_V4.octets());
    assert_eq!(checksum(0, &reply[..20]), 0);
    // ICMP destination unreachable, administratively prohibited (RFC 1812 5.2.7.1), its
    // checksum right, quoting the original header and the first 8 bytes after it.
    let icmp = &reply[20..];
    assert_eq!(icmp[..2], [3, 13]);
    assert_eq!(checksum(0, icmp), 0);
    assert_eq!(icmp[8..], syn[..28]);
}

#[test]
fn a_connection_out_over_ipv6_is_named_and_answered_administratively_prohibited() {
    let to: Ipv6Addr = "2001:db8::7".parse().unwrap();
    let syn = v6(to, 6, &tcp(80, 0x02));
    let (tried, reply) = judge(&syn).unwrap();
    assert_eq!(tried, Tried::Tcp("[2001:db8::7]:80".parse().unwrap()));
    assert_eq!(reply[0] >> 4, 6);
    assert_eq!(reply[6], 58, "ICMPv6");
    assert_eq!(reply[8..24], to.octets());
    assert_eq!(reply[24..40], TUN_V6.octets());
    let icmp = &reply[40..];
    assert_eq!(
        usize::from(u16::from_be_bytes([reply[4], reply[5]])),
        icmp.len()
    );
    assert_eq!(icmp[..2], [1, 1]);
    // The checksum over the pseudo-header (RFC 8200 8.1) and the message is right.
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&to.octets());
    pseudo.extend_from_slice(&TUN_V6.octets());
    pseudo.extend_from_slice(&u32::try_from(icmp.len()).unwrap().to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    assert_eq!(checksum(sum_words(0, &pseudo), icmp), 0);
    assert_eq!(icmp[8..], syn[..]);
}

#[test]
fn a_name_lookup_is_named_with_the_name_asked_for() {
    let packet = v4([10, 255, 255, 53], 17, &dns(&[b"models", b"example"]));
    let (tried, _) = judge(&packet).unwrap();
    assert_eq!(
        tried.to_string(),
        "a name lookup of \"models.example\" (UDP to 10.255.255.53:53)"
    );
    // A name's bytes outside printable ASCII are escaped, the log line stays one line.
    let packet = v4([10, 255, 255, 53], 17, &dns(&[b"a\nb\x1b", b"x"]));
    let (tried, _) = judge(&packet).unwrap();
    assert_eq!(
        tried,
        Tried::Udp(
            "10.255.255.53:53".parse().unwrap(),
            Some(whole("a\\x0ab\\x1b.x"))
        )
    );
    // Another UDP port: a datagram, no name.
    let packet = v6(
        "2001:db8::9".parse().unwrap(),
        17,
        &[0, 1, 0x1f, 0x90, 0, 8, 0, 0],
    );
    assert_eq!(
        judge(&packet).unwrap().0.to_string(),
        "a UDP datagram to [2001:db8::9]:8080"
    );
}

#[test]
fn what_is_no_attempt_to_leave_is_neither_logged_nor_answered() {
    // The kernel's own multicast (MLD, router solicitations; IGMP).
    assert_eq!(
        judge(&v6("ff02::16".parse().unwrap(), 58, &[143, 0, 0, 0])),
        None
    );
    assert_eq!(judge(&v4([224, 0, 0, 22], 2, &[0x22, 0, 0, 0])), None);
    // A TCP segment that is no connection's first (SYN-ACK, RST, ACK).
    for flags in [0x12, 0x04, 0x10] {
        assert_eq!(
            judge(&v4([203, 0, 113, 7], 6, &tcp(443, flags))),
            None,
            "{flags:#x}"
        );
    }
    // An ICMP error, and an echo reply: never answered. An echo request is an attempt.
    assert_eq!(judge(&v4([203, 0, 113, 7], 1, &[3, 1, 0, 0])), None);
    assert_eq!(judge(&v4([203, 0, 113, 7], 1, &[0, 0, 0, 0])), None);
    assert_eq!(
        judge(&v4([203, 0, 113, 7], 1, &[8, 0, 0, 0])).unwrap().0,
        Tried::Other("203.0.113.7".parse().unwrap(), 1)
    );
    // A later fragment.
    let mut fragment = v4([203, 0, 113, 7], 6, &tcp(443, 0x02));
    fragment[6..8].copy_from_slice(&[0, 0x10]);
    assert_eq!(judge(&fragment), None);
}

#[test]
fn no_prefix_of_a_packet_and_no_byte_changed_makes_it_panic() {
    let packets = [
        v4([203, 0, 113, 7], 6, &tcp(443, 0x02)),
        v4([10, 255, 255, 53], 17, &dns(&[b"models", b"example"])),
        v6("2001:db8::7".parse().unwrap(), 6, &tcp(80, 0x02)),
        v6("2001:db8::7".parse().unwrap(), 17, &dns(&[b"a"])),
    ];
    for packet in &packets {
        for end in 0..packet.len() {
            let _ = judge(&packet[..end]);
        }
        for at in 0..packet.len() {
            for value in [0x00, 0x0f, 0x3f, 0x40, 0x45, 0x4f, 0x60, 0xff] {
                let mut changed = packet.clone();
                changed[at] = value;
                let _ = judge(&changed);
            }
        }
    }
    // A header length past the packet, a label past the message.
    assert_eq!(judge(&[0x4f; 30]), None);
    assert_eq!(
        query_name(&[0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 9, b'a']),
        None
    );
}

/// A UDP datagram over the MTU leaves over IPv6 in fragments (a fragment header, 44, in each):
/// the first is named by its transport header (a name lookup, with its name), the others
/// are not logged, as over IPv4; a hop-by-hop header before it is skipped too.
#[test]
fn a_fragmented_name_lookup_over_ipv6_is_named_once_with_its_name() {
    let to: Ipv6Addr = "2001:db8::53".parse().unwrap();
    let query = dns(&[b"frag6", b"example"]);
    let mut first = vec![17, 0, 0, 1, 0, 0, 0, 9];
    first.extend_from_slice(&query);
    let (tried, _) = judge(&v6(to, 44, &first)).unwrap();
    assert_eq!(
        tried.to_string(),
        "a name lookup of \"frag6.example\" (UDP to [2001:db8::53]:53)"
    );
    let mut hop = vec![44, 0, 1, 4, 0, 0, 0, 0];
    hop.extend_from_slice(&first);
    let (tried, _) = judge(&v6(to, 0, &hop)).unwrap();
    assert_eq!(
        tried,
        Tried::Udp(
            "[2001:db8::53]:53".parse().unwrap(),
            Some(whole("frag6.example"))
        )
    );
    // A later fragment (offset 1448 bytes: 181 units of 8), and a chain cut short.
    let later = [17, 0, 0x05, 0xa8, 0, 0, 0, 9, 0, 0, 0, 0];
    assert_eq!(judge(&v6(to, 44, &later)), None);
    assert_eq!(judge(&v6(to, 44, &first[..6])), None);
    assert_eq!(judge(&v6(to, 60, &[17, 200])), None);
}

#[test]
fn a_name_lookup_on_the_loopback_is_answered_refused() {
    let udp = dns(&[b"models", b"example"]);
    let query = &udp[8..];
    let answer = dns_refused(query).unwrap();
    // The query's id and question; QR set, RD kept, AA clear, RCODE 5; one question, no
    // records.
    assert_eq!(answer[..2], query[..2]);
    assert_eq!(answer[2], 0x81);
    assert_eq!(answer[3] & 0x0f, 5);
    assert_eq!(answer[4..12], [0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(answer[12..], query[12..]);
    // An answer, or bytes that are no query, get none.
    assert_eq!(dns_refused(&answer), None);
    assert_eq!(dns_refused(b"\x00\x01"), None);
}

/// A name over 1,024 characters, or one a compression pointer ends, is logged as a name
/// lookup still: the name's first 1,024 characters (no escape split), then outside the
/// quotes how long it is or that a pointer ends it. The bite, run once each: `query_name`
/// giving `None` for a name past the bound, then for a pointer, as main's did (whose log
/// then said `a UDP datagram to …` on the tun, `a DNS datagram` on the loopback, the name
/// hidden), fails it.
#[test]
fn a_long_or_compressed_name_is_logged_cut_or_marked_not_hidden() {
    // 17 labels of 63 bytes: 1,087 characters dotted, 1,088 bytes in the query.
    let label = [b'a'; 63];
    let labels: Vec<&[u8]> = vec![&label[..]; 17];
    let packet = v4([10, 255, 255, 53], 17, &dns(&labels));
    let (tried, _) = judge(&packet).unwrap();
    let dotted = vec!["a".repeat(63); 17].join(".");
    assert_eq!(
        tried.to_string(),
        format!(
            "a name lookup of \"{}\"…(1088 bytes) (UDP to 10.255.255.53:53)",
            &dotted[..1024]
        )
    );
    // An escape at the bound is left out whole: 1,023 characters, then `\x00` would pass it.
    let mut name = Vec::new();
    for _ in 0..15 {
        name.push(63);
        name.extend_from_slice(&label);
    }
    // 15 * 64 - 1 = 959 characters, a label of 62 more: 1,022; its byte 0 after a dot.
    name.push(62);
    name.extend_from_slice(&[b'b'; 62]);
    name.extend_from_slice(&[1, 0, 0]);
    let got = query_name(&query(&name)).unwrap();
    assert_eq!(got.shown.len(), 1023, "{got}");
    assert!(got.shown.ends_with("b."), "{got}");
    assert_eq!(got.cut_of, Some(name.len() - 1));
    // A compression pointer ends it: what came before it, marked.
    let name = [3, b'w', b'w', b'w', 0xc0, 0x0c];
    let got = query_name(&query(&name)).unwrap();
    assert_eq!(got.to_string(), "\"www\"…(compressed name)");
    assert_eq!(
        query_name(&query(&[0xc0, 0x0c])).unwrap().to_string(),
        "\"\"…(compressed name)"
    );
    // On the loopback's port 53 too: a query, answered REFUSED (and logged the same way).
    assert!(dns_refused(&query(&name)).is_some());
    // A name's own `"` and `…` stay inside the quotes: the mark cannot be forged.
    let forged = query_name(&query(b"\x08x\"\xe2\x80\xa6(9)\0")).unwrap();
    assert_eq!(forged.to_string(), r#""x\"\\xe2\\x80\\xa6(9)""#);
    // A pointer cut short, a reserved label kind: no query.
    assert_eq!(query_name(&query(&[3, b'w', b'w', b'w', 0xc0])[..17]), None);
    assert_eq!(query_name(&query(&[0x41, 0])), None);
}
