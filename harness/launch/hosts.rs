//! Which hosts a run spans: the hostfile's hosts, and whether each is this machine.

/// This machine's host name (in `crate::host`, below launch and the manifest).
pub use crate::host::this_host;
use std::net::IpAddr;

/// A hostfile line's slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostSlots {
    /// `slots=N` on the line.
    Given(u32),
    /// No `slots=`: Open MPI gives the host its processor cores, found on that host at launch.
    Cores,
}

/// The lines of a hostfile as mpirun reads them: (line number from 1, its words: the host, then
/// its options), comments (`#` to the line's end) and blank lines left out.
pub fn hostfile_lines(text: &str) -> impl Iterator<Item = (usize, Vec<&str>)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").split_whitespace().collect::<Vec<_>>()))
        .filter(|(_, words)| !words.is_empty())
}

/// A hostfile's hosts with their slots, in file order.
pub fn hostfile_hosts(text: &str) -> Vec<(String, HostSlots)> {
    hostfile_lines(text)
        .map(|(_, words)| {
            let given = words[1..].iter().find_map(|w| w.strip_prefix("slots=").and_then(|n| n.parse().ok()));
            (words[0].to_string(), given.map_or(HostSlots::Cores, HostSlots::Given))
        })
        .collect()
}

/// Every address of this machine's network interfaces.
pub fn local_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list that is walked read-only and freed with freeifaddrs.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return out;
        }
        let mut cur = head;
        while !cur.is_null() {
            if let Some(ip) = address_of((*cur).ifa_addr) {
                out.push(ip);
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(head);
    }
    out
}

/// The IP address in a `sockaddr`, for IPv4 and IPv6.
///
/// # Safety
/// `sa` is null or points to a valid `sockaddr` of the family it names.
unsafe fn address_of(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    match i32::from((*sa).sa_family) {
        libc::AF_INET => {
            let v4 = &*(sa as *const libc::sockaddr_in);
            Some(IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()))
        }
        libc::AF_INET6 => {
            let v6 = &*(sa as *const libc::sockaddr_in6);
            Some(IpAddr::from(v6.sin6_addr.s6_addr))
        }
        _ => None,
    }
}

/// True when `host` names this machine: `localhost`, a loopback or local address, or its name.
pub fn is_local(host: &str) -> bool {
    if host == "localhost" || host == this_host() || host.split('.').next() == Some(this_host().as_str()) {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback() || local_addresses().contains(&ip),
        Err(_) => false,
    }
}

/// The hosts of a hostfile's text that are not this machine.
pub fn remote_hosts(hostfile_text: &str) -> Vec<String> {
    hostfile_hosts(hostfile_text).into_iter().map(|(h, _)| h).filter(|h| !is_local(h)).collect()
}
