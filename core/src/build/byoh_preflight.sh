#!/bin/sh
# Checks that this host is ready for BYOH's agent (byoh-hostagent v0.5.0) and for kubeadm, before
# the agent is started: one line per failed check, with its fix; exit 0 when all pass, 1 if not.
# Written by `kubectl capi hosts add` for host @HOST@ (ByoHost @NAMESPACE@/@HOST@).
#
#   sh preflight.sh            the checks for kube-proxy in iptables mode
#   sh preflight.sh --ipvs     also the kernel modules kube-proxy's IPVS mode needs
#
# PREFLIGHT_ROOT (default: none) is prepended to every path read (/proc, /sys, /run), so the
# checks can be pointed at another tree. Only POSIX sh and date are used.

ROOT="${PREFLIGHT_ROOT:-}"
HOST=@HOST@
NAMESPACE=@NAMESPACE@
# When `kubectl capi hosts add` made the bootstrap kubeconfig (Unix seconds), and how long its
# token lives: a clock behind the first makes every certificate look not yet valid. A TTL of 0:
# no token yet (`hosts add --check`), so only the clock is checked.
ISSUED=@ISSUED@
TOKEN_TTL=@TOKEN_TTL@
IPVS=0
for arg in "$@"; do
	case "$arg" in
	--ipvs) IPVS=1 ;;
	*)
		echo "preflight: unknown argument $arg (use --ipvs, or nothing)" >&2
		exit 2
		;;
	esac
done

FAILED=0
fail() {
	echo "FAIL $1: $2"
	FAILED=1
}

read_file() {
	# The first line of a file, or nothing when it cannot be read.
	line=
	[ -r "$ROOT$1" ] && { IFS= read -r line <"$ROOT$1" || true; }
	printf '%s' "$line"
}

module_loaded() {
	[ -d "$ROOT/sys/module/$1" ]
}

# Kernel modules kubeadm's preflight and the container runtime's networking need.
for m in overlay br_netfilter; do
	module_loaded "$m" || fail "module $m" "not loaded: modprobe $m, and add it to /etc/modules-load.d/k8s.conf"
done
if [ "$IPVS" = 1 ]; then
	for m in ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh nf_conntrack; do
		module_loaded "$m" || fail "module $m" "not loaded (kube-proxy's IPVS mode needs it): modprobe $m, and add it to /etc/modules-load.d/ipvs.conf"
	done
fi

# Sysctls kubeadm's preflight checks.
sysctl_on() {
	[ "$(read_file "/proc/sys/$1")" = 1 ] ||
		fail "sysctl $2" "is not 1: sysctl -w $2=1, and set it in /etc/sysctl.d/k8s.conf"
}
sysctl_on net/ipv4/ip_forward net.ipv4.ip_forward
sysctl_on net/bridge/bridge-nf-call-iptables net.bridge.bridge-nf-call-iptables

# Swap: the kubelet refuses to start with swap on (unless configured otherwise).
if [ -r "$ROOT/proc/swaps" ]; then
	swaps=0
	while IFS= read -r _; do
		swaps=$((swaps + 1))
	done <"$ROOT/proc/swaps"
	[ "$swaps" -le 1 ] || fail "swap" "is on: swapoff -a, and remove swap entries from /etc/fstab"
fi

# A running container runtime (containerd, as BYOH's installer bundles it).
[ -S "$ROOT/run/containerd/containerd.sock" ] ||
	fail "container runtime" "containerd is not running (no /run/containerd/containerd.sock): systemctl enable --now containerd"

# The kubelet's port must be free (something listening on 10250 is an old kubelet: reset it).
listening_on() {
	# /proc/net/tcp{,6}: local address as hex ADDR:PORT, state 0A is LISTEN.
	port_hex=$(printf '%04X' "$1")
	for f in "$ROOT/proc/net/tcp" "$ROOT/proc/net/tcp6"; do
		[ -r "$f" ] || continue
		while read -r _ local _ state _; do
			case "$local" in
			*:"$port_hex") [ "$state" = 0A ] && return 0 ;;
			esac
		done <"$f"
	done
	return 1
}
for p in 10250; do
	if listening_on "$p"; then
		fail "port $p" "is in use (a kubelet from an earlier cluster?): kubeadm reset -f, or stop what listens on it"
	fi
done

# The agent registers the ByoHost under this machine's hostname.
hn=$(read_file /proc/sys/kernel/hostname)
[ "$hn" = "$HOST" ] ||
	fail "hostname" "is \"$hn\", but the ByoHost is $HOST: hostnamectl set-hostname $HOST (or run kubectl capi hosts add $hn)"

# The clock: behind the bootstrap kubeconfig's issue time, its certificates are not valid yet;
# past the token's life, the kubeconfig is no use.
now=$(date +%s)
if [ "$now" -lt $((ISSUED - 300)) ]; then
	fail "clock" "is more than 5 minutes behind the management cluster's: enable time sync (timedatectl set-ntp true, or chrony)"
elif [ "$TOKEN_TTL" -gt 0 ] && [ "$now" -gt $((ISSUED + TOKEN_TTL)) ]; then
	fail "bootstrap token" "expired (it lives $((TOKEN_TTL / 60)) minutes): run kubectl capi hosts add $HOST -n $NAMESPACE again"
fi

# The Kubernetes this host carries (a host image may bring it: BYOH's --skip-installation),
# which decides the versions a machine on it can run. Reported, not checked.
kubelet_v=
kubeadm_v=
if command -v kubelet >/dev/null 2>&1; then
	# "Kubernetes v1.35.4": the last word.
	kubelet_v=$(kubelet --version 2>/dev/null)
	kubelet_v=${kubelet_v##* }
	kubelet_v=${kubelet_v:-unknown}
fi
if command -v kubeadm >/dev/null 2>&1; then
	kubeadm_v=$(kubeadm version -o short 2>/dev/null) || kubeadm_v=unknown
fi
if [ -n "$kubelet_v$kubeadm_v" ]; then
	echo "preflight: installed: kubelet ${kubelet_v:-none}, kubeadm ${kubeadm_v:-none}"
else
	echo "preflight: no kubelet or kubeadm installed (the agent's installer brings them, unless it runs with --skip-installation)"
fi

if [ "$FAILED" = 0 ]; then
	echo "preflight: $HOST is ready for byoh-hostagent"
fi
exit "$FAILED"
