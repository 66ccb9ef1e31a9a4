# make bench, inside the guests: VM 1 serves, VM 2 measures with rrxe-perf
# (wall clock) and iperf3.  The cases (from the host, in /rrxe/in/cases) are
# "test size qps msgs window millis" lines; every case is bracketed by
# barriers so a failed case cannot desynchronise the rest.  Prints RESULT lines (client) and
# CPU lines: non-idle jiffies (USER_HZ) each VM spent during the case.
rdma_up || exit 1
GID=$(gid_index "$IBDEV" "$MY_IP")
PERF=/rrxe/in/rrxe-perf
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
port=18600
while read -r test size qps msgs window millis; do
	[ -n "$test" ] || continue
	port=$((port + 1))
	barrier "case-$port" 300
	c0=$(busy)
	if [ "$test" = iperf3 ]; then
		if [ "$VM" = 1 ]; then
			timeout 60 iperf3 -s -1 -p "$port" >/dev/null
		else
			retry 20 bash -c "iperf3 -c $PEER_IP -p $port -t 3 -J >/tmp/iperf.json 2>/dev/null" &&
				python3 -c 'import json; d = json.load(open("/tmp/iperf.json")); s = d["end"]["sum_received"]; print("RESULT test=iperf3 size=0 qps=1 msgs=0 seconds=%.3f MBps=%.3f" % (s["seconds"], s["bytes"] / s["seconds"] / 1e6))'
		fi
	elif [ "$VM" = 1 ]; then
		timeout 300 "$PERF" -d "$IBDEV" -g "$GID" -p "$port" || echo "FAILED server $test $size $qps"
	else
		timeout 300 "$PERF" -d "$IBDEV" -g "$GID" -p "$port" -t "$test" -s "$size" -q "$qps" -n "$msgs" \
			-w "$window" -T "$millis" "$PEER_IP" ||
			echo "FAILED test=$test size=$size qps=$qps"
	fi
	echo "CPU vm=$VM test=$test size=$size qps=$qps jiffies=$(($(busy) - c0))"
done </rrxe/in/cases
true
