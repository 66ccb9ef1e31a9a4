# perftest bandwidth tests with -a (every size from 2 bytes to 8 MiB) and
# a 4-QP READ of 1 MiB messages between the two VMs, on rrxe (fast kernel:
# perftest only for completion, its numbers mean nothing under TCG).  Each
# must complete, and no packet may be refused by the IP stack on the way
# out: rrxe paces each QP by the skbs it has in flight (at most 64), so
# send_err stays 0, where answering a READ all at once overflowed eth0's
# queue by millions of packets.  The counters of the C driver's names
# move as it counts them: SENDs completed (rdma_sends) on the sender and
# receives completed (rdma_recvs) on the receiver.  Last, READs under 2%
# loss, answered again from the first missing response.  In the complete
# level only: `interop` runs perftest in make test, against the C driver.
# runs:
# full-runs: rrxe@fast

check "link-add-vm$VM" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
HWC=/sys/class/infiniband/$IBDEV/ports/1/hw_counters
counter() { cat "$HWC/$1"; }

# bw NAME COMMAND...: VM 1 runs COMMAND as server, VM 2 as client.
port=18700
bw() {
	local name=$1 pid
	shift
	if [ "$VM" = 1 ]; then
		timeout 600 "$@" -d "$IBDEV" -x "$GID" -F -p "$port" &
		pid=$!
		retry 30 bash -c "ss -ltnH 'sport = :$port' | grep -q LISTEN"
		barrier "$name"
		check "$name-server" wait "$pid"
	else
		barrier "$name"
		check "$name-client" client_retry 30 timeout 600 "$@" -d "$IBDEV" -x "$GID" -F \
			-p "$port" "$PEER_IP"
	fi
	port=$((port + 1))
}

err0=$(counter send_err)
bw read-all ib_read_bw -a -n 20
bw read-4qp-1m ib_read_bw -q 4 -s 1048576 -n 20
bw write-all ib_write_bw -a -n 20
sends0=$(counter rdma_sends)
recvs0=$(counter rdma_recvs)
bw send-all ib_send_bw -a -n 20
sends=$(($(counter rdma_sends) - sends0))
recvs=$(($(counter rdma_recvs) - recvs0))
err=$(($(counter send_err) - err0))
check "send-err-unchanged-vm$VM" test "$err" -eq 0
# 23 sizes of at least 20 messages each (perftest adds a few of its own).
if [ "$VM" = 2 ]; then
	check "rdma-sends-counted" test "$sends" -ge $((23 * 20))
else
	check "rdma-recvs-counted" test "$recvs" -ge $((23 * 20))
fi
echo "# send_err +$err rdma_sends +$sends rdma_recvs +$recvs"

# READs with 2% of VM 1's packets lost on the way out: READ responses go
# missing, the requester asks again from the first missing one, and the
# responder answers the duplicate READ with the original's responses from
# there.
if [ "$VM" = 1 ]; then
	dups0=$(counter duplicate_request)
	check "netem-loss" tc qdisc add dev eth0 root netem loss 2%
fi
bw read-lossy ib_read_bw -s 262144 -n 20
if [ "$VM" = 1 ]; then
	check "netem-off" tc qdisc del dev eth0 root
	dups=$(($(counter duplicate_request) - dups0))
	check "read-duplicates-seen" test "$dups" -gt 0
	echo "# duplicate_request +$dups"
fi
echo "# $(rdma statistic show link "$IBDEV/1" | tr -s ' \n' ' ')"
barrier teardown
check "link-delete-vm$VM" rdma link delete "$IBDEV"
finish
