# libfabric (Debian's 2.1) over the driver between the two VMs: fi_info
# lists the device under the verbs provider, and fi_pingpong with its data
# integrity check (-c: every byte of every message compared) runs over the
# verbs provider's MSG endpoints (RC QPs connected through the RDMA CM),
# over the RDM endpoints of verbs;ofi_rxm (RC underneath, with rxm's own
# eager and rendezvous protocols: large messages move by RDMA READ), and
# with tagged messages on RDM.  Each ping-pong runs every size fi_pingpong
# has, 0 bytes to 8 MiB, 4 round trips each.  VM 1 serves, VM 2 is the
# client.  make test runs it on the fast kernel (every size there takes
# about 30 s, against 200 s on the debug kernel, which the complete level
# runs).
# runs: rrxe@fast
# full-runs: rrxe@debug rxe@fast rxe+rrxe@debug
# timeout: 900

check "link-add-vm$VM" rdma_up

check "fi-info-verbs-msg-lists-device" bash -c "fi_info -p verbs -t FI_EP_MSG | grep -E 'domain: *$IBDEV\$'"
fi_info -p verbs -t FI_EP_MSG 2>&1 | grep -E 'provider|fabric|domain|type' | head -n 8
check "fi-info-rxm-rdm-lists-device" bash -c "fi_info -p 'verbs;ofi_rxm' -t FI_EP_RDM | grep -E 'domain: *$IBDEV\$'"

# Failure words in fi_pingpong's output (it prints the failing check and
# exits non-zero, but say it here as well).
FAIL_RE='error|fail|mismatch|corrupt|invalid'
port=47600
# fi_case NAME PROVIDER SIZE ARGS...: a ping-pong of SIZE bytes, or of
# every size ("all"), data checked.
fi_case() {
	local name=$1 prov=$2 size=$3
	shift 3
	serve_case "$FAIL_RE" 1 "$name" 600 "tcp_listening $port" \
		"fi_pingpong -p '$prov' -c -S $size -I 4 -B $port $*" \
		"fi_pingpong -p '$prov' -c -S $size -I 4 -P $port $* \$PEER_IP"
	port=$((port + 1))
}
fi_case fi-msg-pingpong verbs all -e msg
# rxm sizes its MSG CQs for a universe of 256 peers by default, beyond the
# 32767 CQEs both drivers allow (ibv_create_cq: EINVAL, so fi_enable fails
# alike on both): two VMs need a universe of two.
export FI_UNIVERSE_SIZE=4
fi_case fi-rdm-pingpong "verbs;ofi_rxm" all -e rdm
# Tagged messages take the RDM paths above with tag matching on top.
fi_case fi-rdm-tagged-pingpong "verbs;ofi_rxm" all -e rdm -m tagged
# The verbs provider's QPs are gone with the programs.
check "no-qps-left-vm$VM" retry 30 bash -c "! rdma res show qp | grep -E 'link $IBDEV/.*type RC'"
check "link-delete-vm$VM" timeout 60 rdma link delete "$IBDEV"
finish
