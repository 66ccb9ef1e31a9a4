# make bench, inside the guests: VM 1 serves, VM 2 measures with rrxe-perf
# (wall clock) and iperf3.  The cases (from the host, in /rrxe/in/cases) are
# "test size qps msgs window millis [label mode]" lines (label: the case's
# name in RESULT, CPU and STAT lines, default the test; mode event: the
# client waits on a completion channel, rrxe-perf -e); every case is bracketed by
# barriers so a failed case cannot desynchronise the rest.  Prints RESULT lines (client),
# CPU lines: non-idle jiffies (USER_HZ) each VM spent during the case, and
# STAT lines: what the case moved in each VM's counters (nonzero deltas
# only), to explain the figures: nic_* eth0's packets and receive drops (sysfs) and
# virtio-net's kicks of the host (`ethtool -S`, all queues), irq_net the
# interrupts of the interrupt line eth0's virtio device is on (the guest
# has no MSI: the line is shared with the other virtio devices, idle during
# a case), qdisc_dropped the drops of eth0's root qdisc (`tc -s`),
# softnet_* the receive softirq's packets, backlog drops and time squeezes
# (/proc/net/softnet_stat), rdma_* the RDMA device's counters (`rdma
# statistic`, the same names on rxe and rrxe); stat_v=2 marks lines that
# count the drops (before it they were not collected).  A line "mtu MTU" sets eth0's
# MTU in both guests and waits for the port's active MTU to follow; the
# cases mr_reg, qp_rate and qp_mem need no peer and run in VM 2 alone.
rdma_up || exit 1
GID=$(gid_index "$IBDEV" "$MY_IP")
PERF=/rrxe/in/rrxe-perf
NET_VIRTIO=$(basename "$(readlink -f /sys/class/net/eth0/device)")
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
# counters: "name value" lines of every counter a STAT line reports.
counters() {
	echo "nic_rx_packets $(cat /sys/class/net/eth0/statistics/rx_packets)"
	echo "nic_tx_packets $(cat /sys/class/net/eth0/statistics/tx_packets)"
	ethtool -S eth0 2>/dev/null | awk -F: '$1 ~ /^ *[rt]x_kicks$/ { gsub(/ /, ""); print "nic_" $1, $2 }'
	# "N: count... IO-APIC N-fasteoi virtio4, virtio3": summed over CPUs.
	awk -v dev="$NET_VIRTIO" '{ for (i = 2; i <= NF; i++) if ($i == dev || $i == dev ",") break }
		i <= NF { s = 0; for (i = 2; $i ~ /^[0-9]+$/; i++) s += $i; print "irq_net", s }' /proc/interrupts
	echo "nic_rx_dropped $(cat /sys/class/net/eth0/statistics/rx_dropped)"
	# The root qdisc's drops (its first "dropped": mq sums its children).
	tc -s qdisc show dev eth0 2>/dev/null | awk '!done && /dropped/ {
		for (i = 1; i < NF; i++) if ($i == "(dropped") { v = $(i + 1); sub(",", "", v); print "qdisc_dropped", v; done = 1 } }'
	# Columns 1, 2 and 3 (hex): packets processed, dropped (the receive
	# backlog was full) and time squeezes, per CPU.
	local p=0 d=0 q=0 a b c rest
	while read -r a b c rest; do
		p=$((p + 0x$a)) d=$((d + 0x$b)) q=$((q + 0x$c))
	done </proc/net/softnet_stat
	echo "softnet_processed $p"
	echo "softnet_dropped $d"
	echo "softnet_squeezed $q"
	rdma statistic show link "$IBDEV/1" 2>/dev/null | awk 'NF == 2 && $2 ~ /^[0-9]+$/ { print "rdma_" $1, $2 }'
}
# stat_line BEFORE AFTER: the nonzero differences as name=delta words.
stat_line() {
	awk 'NR == FNR { before[$1] = $2; next }
		{ d = $2 - before[$1]; if (d != 0) printf " %s=%d", $1, d }' "$1" "$2"
}
# set_mtu MTU: eth0's MTU, then wait for the port's active MTU to reach
# the largest IB MTU that fits with 96 bytes of headers (iboe_get_mtu;
# rdma_rxe reserves 80, so it may report one size more).
set_mtu() {
	local want=1024 n=0
	[ "$1" -ge 2144 ] && want=2048
	[ "$1" -ge 4192 ] && want=4096
	ip link set eth0 mtu "$1" || return 1
	until [ "$(ibv_devinfo -d "$IBDEV" | awk '/active_mtu:/ { print $2 + 0 }')" -ge "$want" ]; do
		n=$((n + 1))
		[ $n -lt 100 ] || { ibv_devinfo -d "$IBDEV" | grep -E 'state:|active_mtu'; return 1; }
		sleep 0.1
	done
}
port=18600
while read -r test size qps msgs window millis label mode; do
	[ -n "$test" ] || continue
	if [ "$test" = mtu ]; then
		barrier "mtu-$size" 300
		# The cases after it would run at the wrong MTU under its label:
		# none runs (the peer gives up at its next barrier).
		set_mtu "$size" || { echo "FAILED test=mtu size=$size qps=0 (active_mtu did not follow)"; exit 1; }
		echo "MTU vm=$VM eth0=$(cat /sys/class/net/eth0/mtu) $(ibv_devinfo -d "$IBDEV" | grep -o 'active_mtu:.*' | tr -d '\t ')"
		continue
	fi
	label=${label:-$test}
	ev=
	[ "$mode" = event ] && ev=-e
	port=$((port + 1))
	barrier "case-$port" 300
	counters >/tmp/counters.0
	c0=$(busy)
	# The host's benches/qemu-threads starts its case here.
	echo "BEGIN vm=$VM test=$label size=$size qps=$qps"
	if [ "$test" = iperf3 ]; then
		if [ "$VM" = 1 ]; then
			timeout 60 iperf3 -s -1 -p "$port" >/dev/null
		else
			retry 20 bash -c "iperf3 -c $PEER_IP -p $port -t 3 -J >/tmp/iperf.json 2>/dev/null" &&
				python3 -c 'import json, sys; d = json.load(open("/tmp/iperf.json")); s = d["end"]["sum_received"]; print("RESULT test=%s size=0 qps=1 msgs=0 seconds=%.3f MBps=%.3f" % (sys.argv[1], s["seconds"], s["bytes"] / s["seconds"] / 1e6))' "$label"
		fi
	elif [ "$test" = mr_reg ] || [ "$test" = qp_rate ] || [ "$test" = qp_mem ]; then
		if [ "$VM" = 2 ]; then
			timeout 300 "$PERF" -d "$IBDEV" -t "$test" -s "$((size > 0 ? size : 1))" -q "$qps" -T "$millis" >/tmp/result ||
				echo "FAILED test=$label size=$size qps=$qps"
			cat /tmp/result
		fi
	elif [ "$VM" = 1 ]; then
		timeout 300 "$PERF" -d "$IBDEV" -g "$GID" -p "$port" ||
			echo "FAILED test=$label size=$size qps=$qps (server)"
	else
		if timeout 300 "$PERF" -d "$IBDEV" -g "$GID" -p "$port" -t "$test" -s "$size" -q "$qps" -n "$msgs" \
			-w "$window" -T "$millis" $ev "$PEER_IP" >/tmp/result; then
			sed "s/^RESULT test=[a-z_]* /RESULT test=$label /" /tmp/result
		else
			cat /tmp/result
			echo "FAILED test=$label size=$size qps=$qps"
		fi
	fi
	echo "CPU vm=$VM test=$label size=$size qps=$qps jiffies=$(($(busy) - c0))"
	counters >/tmp/counters.1
	# stat_v=2: the counters include the drops (a missing one is a 0).
	echo "STAT vm=$VM test=$label size=$size qps=$qps stat_v=2$(stat_line /tmp/counters.0 /tmp/counters.1)"
done </rrxe/in/cases
true
