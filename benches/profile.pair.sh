# benches/profile: one rrxe-perf case with `perf record` (cpu-clock, all
# CPUs, call graphs) in both guests.  The case comes from /rrxe/in/case
# ("test size qps window millis"); each VM writes its `perf report` to
# /rrxe/out/perf-vm<N>.txt.  Under TCG the guest has no PMU and its clock
# ticks in jiffies, so samples come at the tick (250 Hz): run a case for
# several seconds.
rdma_up || exit 1
GID=$(gid_index "$IBDEV" "$MY_IP")
PERF=/rrxe/in/rrxe-perf
read -r test size qps window millis </rrxe/in/case
barrier start 300
perf record -q -a -g -e cpu-clock -o /tmp/perf.data &
rec=$!
sleep 1
if [ "$VM" = 1 ]; then
	timeout 300 "$PERF" -d "$IBDEV" -g "$GID" -p 18650 || echo "FAILED server"
else
	timeout 300 "$PERF" -d "$IBDEV" -g "$GID" -p 18650 -t "$test" -s "$size" -q "$qps" -n 1 \
		-w "$window" -T "$millis" "$PEER_IP" || echo "FAILED client"
fi
barrier done 300
kill -INT "$rec"
wait "$rec"
perf report -i /tmp/perf.data --stdio --no-children --sort sym -g none --percent-limit 0.5 \
	>"/rrxe/out/perf-vm$VM.txt" 2>/dev/null
perf report -i /tmp/perf.data --stdio --no-children --sort sym -g caller,0.5,callee --percent-limit 3 \
	>"/rrxe/out/perf-vm$VM-graph.txt" 2>/dev/null
head -40 "/rrxe/out/perf-vm$VM.txt"
true
