# NFS over RDMA between the two VMs: the kernel's NFS server (nfsd with
# nfs-utils' rpc.mountd) in VM 1 exports a tmpfs and listens for
# RPC-over-RDMA (RFC 8166) on port 20049 beside TCP; the kernel's NFS
# client in VM 2 mounts it with `-o rdma,port=20049`, NFSv4.2.  RPC-over-RDMA
# carries small calls and replies inline in SENDs and moves large READ and
# WRITE payloads by the server's RDMA WRITE (read chunks) and RDMA READ
# (write chunks) into and out of memory the client registers with
# fast-register MRs.  The client writes a file set of sizes around the path
# MTU, the inline threshold (4 KiB), pages and up to 4 MiB, remounts and
# compares every byte; the server checks the same SHA-256 over its copy;
# fio writes files with O_DIRECT at 4 KiB, 64 KiB and 1 MiB with a CRC32C
# verify read.  The mount must use the RDMA transport, the port counters
# must show the data crossed the fabric, and nothing may be left behind.
# runs: rrxe@debug
# full-runs: rxe@fast rxe@debug rxe+rrxe@debug
# timeout: 900

NFS_RDMA_PORT=20049

check "link-add-vm$VM" rdma_up

# nfs_errors: neither side logged an RPC-over-RDMA or NFS transport error.
nfs_errors() {
	! dmesg | grep -iE 'rpcrdma.*(error|fail|flush|disconnect)|svcrdma.*(error|fail)|nfs: server .* not responding|NFS: .*error'
}

if [ "$VM" = 1 ]; then
	# ---- server ------------------------------------------------------------
	check "nfsd-loaded" modprobe -a nfsd rpcrdma
	# The root is read-only: nfs-utils' state goes to a tmpfs.
	server_up() {
		mount -t tmpfs tmpfs /var/lib/nfs || return 1
		mkdir -p /var/lib/nfs/nfsdcld /run/rpc_pipefs /run/rpcbind /tmp/export
		touch /var/lib/nfs/etab /var/lib/nfs/rmtab
		# Debian's nfs.conf puts the RPC pipes in /run/rpc_pipefs.
		mount -t rpc_pipefs sunrpc /run/rpc_pipefs || return 1
		mount -t nfsd nfsd /proc/fs/nfsd || return 1
		mount -t tmpfs -o size=128M tmpfs /tmp/export || return 1
		rpcbind -w || return 1
		# NFSv4 client tracking: with no client to wait for, nfsd ends
		# its grace period early.
		nfsdcld || return 1
		# The export is the root of the server's NFSv4 name space
		# (fsid=0): the root file system above it, 9p, cannot be
		# exported, and tmpfs has no UUID to name it by.
		exportfs -i -o rw,no_root_squash,insecure,fsid=0 "$PEER_IP:/tmp/export" || return 1
		rpc.mountd || return 1
		# The shortest grace period nfsd allows: the client's first OPEN
		# waits it out.
		echo 10 >/proc/fs/nfsd/nfsv4leasetime
		echo 10 >/proc/fs/nfsd/nfsv4gracetime
		rpc.nfsd -N 3 4 || return 1
		echo "rdma $NFS_RDMA_PORT" >/proc/fs/nfsd/portlist || return 1
		cat /proc/fs/nfsd/portlist
		retry 30 cm_port_listening "$NFS_RDMA_PORT"
	}
	check "nfsd-started" server_up
	rdma res show cm_id | grep -i listen
	barrier nfs-server-ready 300
	v=$(recv_value 700)
	VALUE_PORT=$((VALUE_PORT + 1))
	check "server-holds-client-files" same_sum "the server's copy" "$(tree_sum /tmp/export/set)" "$v"
	check "server-rc-qps" rc_qp_rts
	barrier nfs-server-checked 300
	barrier nfs-client-done 700
	check "server-no-nfs-errors" nfs_errors
	server_down() {
		rpc.nfsd 0 || return 1
		exportfs -ua
		pkill -x rpc.mountd
		pkill -x nfsdcld
		pkill -x rpcbind
		retry 30 no_cm_ids || return 1
		umount /proc/fs/nfsd && umount /run/rpc_pipefs && umount /tmp/export &&
			umount /var/lib/nfs
	}
	check "nfsd-stopped" server_down
	check "nfsd-unloaded" retry 60 modprobe -r nfsd rpcrdma
else
	# ---- client ------------------------------------------------------------
	check "nfs-loaded" modprobe -a nfsv4 rpcrdma
	mkdir -p /tmp/mnt
	make_file_set /tmp/set
	want=$(tree_sum /tmp/set)
	# nfs_mount [OPTIONS]: NFSv4.2 over RPC-over-RDMA; the mount's
	# options must name the RDMA transport.
	nfs_mount() {
		timeout 120 mount -t nfs4 "$PEER_IP:/" /tmp/mnt \
			-o "rdma,port=$NFS_RDMA_PORT,vers=4.2${1:+,$1}" || return 1
		grep " /tmp/mnt " /proc/mounts
		grep " /tmp/mnt " /proc/mounts | grep -q "proto=rdma"
	}
	barrier nfs-server-ready 300
	sent0=$(port_counter sent_bytes) rcvd0=$(port_counter rcvd_bytes)
	check "nfs-rdma-mount" retry 60 nfs_mount
	check "mountstats-xprt-rdma" bash -c "grep -A 40 ' /tmp/mnt ' /proc/self/mountstats | grep -E '^[[:space:]]*xprt:[[:space:]]+rdma'"
	check_file_set_round nfs_mount
	# O_DIRECT: every read and write is an NFS READ/WRITE of its own,
	# moved by the server's RDMA WRITE/READ above the inline threshold.
	check_fio_verify /tmp/mnt
	# The client wrote the file set (6.5 MiB) and fio's files, read
	# both back: its port counters moved at least that much each way.
	check "bytes-crossed-fabric" fabric_moved "$sent0" "$rcvd0" $((FIO_MIB + 6))
	check "client-rc-qps" rc_qp_rts
	check "send-file-set-sum" send_value "$want"
	barrier nfs-server-checked 300
	check "nfs-final-umount" timeout 120 umount /tmp/mnt
	check "client-no-nfs-errors" nfs_errors
	barrier nfs-client-done 700
	check "nfs-unloaded" retry 30 modprobe -r nfsv4 nfs rpcrdma
fi
check "link-delete-vm$VM" timeout 60 rdma link delete "$IBDEV"
finish
