#!/bin/sh
# netns_link.sh - a private, optionally rate-shaped network link for the
# network-bound scenario (http_loader.py).
#
#   netns_link.sh up NAME RATE_MBIT   create namespace NAME (the server side),
#                                     a veth pair root <-> NAME on a private
#                                     /30, shape NAME's egress (the download
#                                     direction) to RATE_MBIT with tbf
#                                     (RATE_MBIT 0 = unshaped); prints the
#                                     server address (one line on stdout).
#   netns_link.sh down NAME           remove all of it (idempotent).
#
# Addresses: 10.231.77.1 (root side) / 10.231.77.2 (server, in NAME) by
# default; override the /30 base with NETNS_LINK_NET=A.B.C (host .1, server .2)
# or NETNS_LINK_PREFIX=A.B.C.D (the .0 of the /30; host +1, server +2).
# Only `ip` and `tc` (iproute2) are used. Nothing is routed beyond the /30:
# the namespace has no default route and no other interface than lo.
#
# Typical test use (root):
#   ADDR=$(sh netns_link.sh up pmnet 200)
#   ip netns exec pmnet python http_loader.py serve --data D --port 8000 --bind "$ADDR" &
#   python http_loader.py job --url "http://$ADDR:8000" --data D
#   kill %1; sh netns_link.sh down pmnet
set -eu

usage() {
    echo "usage: $0 up NAME RATE_MBIT | down NAME" >&2
    exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
name=$2

case "$name" in
    *[!A-Za-z0-9_.-]*|'') echo "$0: bad namespace name '$name'" >&2; exit 2 ;;
esac

# veth names are at most 15 characters: "nl" + h|n + up to 12 of NAME.
short=$(printf '%s' "$name" | cut -c1-12)
vhost="nlh$short"
vns="nln$short"

if [ -n "${NETNS_LINK_PREFIX:-}" ]; then
    base=${NETNS_LINK_PREFIX%.*}
    last=${NETNS_LINK_PREFIX##*.}
    host_ip="$base.$((last + 1))"
    srv_ip="$base.$((last + 2))"
else
    net=${NETNS_LINK_NET:-10.231.77}
    host_ip="$net.1"
    srv_ip="$net.2"
fi

down() {
    # Deleting one end of a veth pair deletes the other; deleting the
    # namespace deletes whatever is left inside it (and its qdiscs).
    ip link del "$vhost" 2>/dev/null || true
    ip netns del "$name" 2>/dev/null || true
}

case "$cmd" in
    down)
        down
        ;;
    up)
        [ $# -eq 3 ] || usage
        rate=$3
        case "$rate" in
            ''|*[!0-9]*) echo "$0: RATE_MBIT must be a whole number (0 = unshaped)" >&2; exit 2 ;;
        esac
        # Start from a clean state (re-running `up` re-creates the link).
        down
        trap 'down' EXIT
        ip netns add "$name"
        ip link add "$vhost" type veth peer name "$vns"
        ip link set "$vns" netns "$name"
        # No IPv6 link-local addresses / DAD / router solicitations: keep the
        # link quiet apart from the test's own traffic.
        ip link set dev "$vhost" addrgenmode none 2>/dev/null || true
        ip -n "$name" link set dev "$vns" addrgenmode none 2>/dev/null || true
        ip addr add "$host_ip/30" dev "$vhost"
        ip -n "$name" addr add "$srv_ip/30" dev "$vns"
        ip link set dev "$vhost" up
        ip -n "$name" link set dev lo up
        ip -n "$name" link set dev "$vns" up
        if [ "$rate" -gt 0 ]; then
            # Server egress = the download direction. A token bucket at RATE
            # Mbit/s; a small burst so the rate holds at sub-second scale.
            ip netns exec "$name" tc qdisc add dev "$vns" root tbf \
                rate "${rate}mbit" burst 32kbit latency 400ms
        fi
        trap - EXIT
        echo "$srv_ip"
        ;;
    *)
        usage
        ;;
esac
