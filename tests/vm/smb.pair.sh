# SMB Direct between the two VMs: the kernel's SMB server (ksmbd, with
# ksmbd-tools' user-space daemon) in VM 1 shares a tmpfs and listens for
# SMB Direct on port 445 through the RDMA CM; the kernel's SMB client (cifs)
# in VM 2 mounts it with `-o rdma`, SMB 3.1.1.  SMB Direct carries the
# protocol in SENDs with credits and moves large reads and writes by the
# server's RDMA READ and WRITE into buffers the client registers (FRWR).
# The client writes a file set of sizes around the path MTU, pages and up
# to 4 MiB, remounts and compares every byte, the server checks the same
# SHA-256 over its copy, and fio writes a file with O_DIRECT (cache=none)
# at 4 KiB, 64 KiB and 1 MiB with a CRC32C verify read.  The session must
# be an SMB Direct one, the port counters must show the data crossed the
# fabric, and nothing may be left behind.
# runs: rrxe@fast
# full-runs: rrxe@debug rxe@fast rxe+rrxe@debug rrxe+rxe@debug
# timeout: 900

PASS=rrxe-smb-test

check "link-add-vm$VM" rdma_up

# smb_errors: neither side logged an SMB Direct or RDMA error.
smb_errors() {
	! dmesg | grep -iE 'smbdirect.*(error|fail)|smb_direct.*(error|fail)|ksmbd.*(error|fail)|CIFS: VFS:.*(rdma|smbd)'
}

if [ "$VM" = 1 ]; then
	# ---- server ------------------------------------------------------------
	check "ksmbd-loaded" modprobe ksmbd
	# The root is read-only: ksmbd-tools' configuration goes to a tmpfs.
	mount -t tmpfs tmpfs /etc/ksmbd
	mkdir -p /tmp/share
	mount -t tmpfs -o size=96M tmpfs /tmp/share
	cat >/etc/ksmbd/ksmbd.conf <<EOF
[global]
	netbios name = rrxe-vm1
[share]
	path = /tmp/share
	read only = no
	valid users = root
EOF
	server_up() {
		ksmbd.adduser -a root -p "$PASS" || return 1
		ksmbd.mountd || return 1
		# ksmbd starts its transports (TCP and the RDMA listeners) once
		# the daemon has handed it the configuration.
		retry 30 cm_port_listening 445
	}
	check "ksmbd-started" server_up
	rdma res show cm_id | grep -i listen
	barrier smb-server-ready 300
	v=$(recv_value 700)
	VALUE_PORT=$((VALUE_PORT + 1))
	echo "# client: the file set has SHA-256 ${v:-none}"
	check "server-holds-client-files" same_sum "the server's copy" "$(tree_sum /tmp/share/set)" "$v"
	check "server-rc-qps" rc_qp_rts
	barrier smb-server-checked 300
	barrier smb-client-done 700
	check "server-no-smbdirect-errors" smb_errors
	server_down() {
		ksmbd.control -s || return 1
		retry 30 bash -c "! pgrep -x ksmbd.mountd >/dev/null" || pkill -x ksmbd.mountd
		retry 30 no_cm_ids || return 1
		umount /tmp/share && umount /etc/ksmbd
	}
	check "ksmbd-stopped" server_down
	check "ksmbd-unloaded" timeout 60 modprobe -r ksmbd
else
	# ---- client ------------------------------------------------------------
	check "cifs-loaded" modprobe cifs
	mkdir -p /tmp/mnt
	make_file_set /tmp/set
	want=$(tree_sum /tmp/set)
	# smb_mount [OPTIONS]: SMB 3.1.1 over SMB Direct.
	smb_mount() {
		timeout 120 mount -t cifs "//$PEER_IP/share" /tmp/mnt \
			-o "rdma,vers=3.1.1,username=root,password=$PASS${1:+,$1}" || return 1
		grep " /tmp/mnt " /proc/mounts
		grep " /tmp/mnt " /proc/mounts | grep -q "rdma"
	}
	barrier smb-server-ready 300
	sent0=$(port_counter sent_bytes) rcvd0=$(port_counter rcvd_bytes)
	check "smb-direct-mount" retry 60 smb_mount
	# The session's transport is SMB Direct, connected (cifs lists its
	# state; an interface's "rdma" capability would not say so).
	check "session-is-smbdirect" bash -c "grep -E 'SMBDirect protocol version: .* transport status: CONNECTED' /proc/fs/cifs/DebugData"
	check_file_set_round smb_mount
	check "smb-umount-2" timeout 120 umount /tmp/mnt
	# cache=none: every read and write is an SMB2 READ/WRITE of its own,
	# moved by the server's RDMA WRITE/READ above the threshold.
	check "smb-mount-cache-none" retry 30 smb_mount cache=none
	check_fio_verify /tmp/mnt
	# The client wrote the file set (6.5 MiB) and fio's files, read
	# both back: its port counters moved at least that much each way.
	check "bytes-crossed-fabric" fabric_moved "$sent0" "$rcvd0" $((FIO_MIB + 6))
	check "client-rc-qps" rc_qp_rts
	check "send-file-set-sum" send_value "$want"
	barrier smb-server-checked 300
	check "smb-final-umount" timeout 120 umount /tmp/mnt
	check "client-no-smbdirect-errors" smb_errors
	barrier smb-client-done 700
	check "cifs-unloaded" retry 30 modprobe -r cifs
fi
check "link-delete-vm$VM" timeout 60 rdma link delete "$IBDEV"
finish
