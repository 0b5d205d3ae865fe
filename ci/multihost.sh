#!/usr/bin/env bash
# Two hosts on this machine for parlab's multi-host test (tests/integration/multihost.rs):
# this host at 10.251.77.1 and a network namespace `parlab-hostb` at 10.251.77.2, joined by a
# veth pair. Open MPI starts its daemon on host B through ci/netns-rsh (OMPI_MCA_plm_rsh_agent),
# which enters the namespace with its own UTS namespace and host name `parlab-hostb`.
#   ci/multihost.sh up     make the hosts (removing any leftovers first)
#   ci/multihost.sh down   end every process inside host B and remove both ends
# Needs root and iproute2 (`ip netns`); both commands are idempotent.
set -euo pipefail
NS=parlab-hostb
A_IF=plmh0
B_IF=plmh1
A_IP=10.251.77.1
B_IP=10.251.77.2
BITS=24

down() {
  if ip netns list 2>/dev/null | grep -qw "$NS"; then
    ip netns pids "$NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$NS"
  fi
  ip link del "$A_IF" 2>/dev/null || true
}

up() {
  down
  ip netns add "$NS"
  ip link add "$A_IF" type veth peer name "$B_IF"
  ip link set "$B_IF" netns "$NS"
  ip addr add "$A_IP/$BITS" dev "$A_IF"
  ip link set "$A_IF" up
  ip -n "$NS" addr add "$B_IP/$BITS" dev "$B_IF"
  ip -n "$NS" link set "$B_IF" up
  ip -n "$NS" link set lo up
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
