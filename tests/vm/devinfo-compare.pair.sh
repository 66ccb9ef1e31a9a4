# rrxe against the C driver, field by field: VM 1 runs one driver, VM 2 the
# other, each brings its device up on eth0, and VM 2 compares the two
# `ibv_devinfo -v` reports after masking what differs per host (device name,
# GUIDs, GID addresses).  Every remaining difference must be one that README
# documents (ALLOWED below, keep the two in step); a field that differs and is
# not listed fails, and so does a listed one that no longer differs.  When
# both VMs run the same driver the masked reports must be identical.
# runs: rxe+rrxe@fast
# full-runs: rxe+rrxe@debug rxe@debug rrxe@debug rxe@fast

# Field names (ibv_devinfo -v) whose values differ between the drivers, on
# purpose, as README's "rrxe and the C driver" section explains: none since
# rrxe has on-demand paging and the C driver's three path flags.
ALLOWED=""

check "link-add-vm$VM" rdma_up

# Mask per-host values; print "field<TAB>value" lines, flag lists folded
# into their field.
devinfo_norm() {
	ibv_devinfo -v -d "$IBDEV" | awk '
		/^[ \t]*(GID\[ *[0-9]+\]|[A-Za-z_][A-Za-z0-9_ ]*):/ {
			line = $0; sub(/^[ \t]+/, "", line)
			key = line; sub(/:.*/, "", key); gsub(/ /, "_", key)
			val = line; sub(/^[^:]*:[ \t]*/, "", val)
			if (key == "hca_id") val = "DEV"
			if (key ~ /guid$/) val = "GUID"
			if (key ~ /^GID\[/) { sub(/^fe80::[0-9a-f:]+/, "fe80::EUI64", val); sub(/^::ffff:[0-9.]+/, "::ffff:IPV4", val) }
			last = key; print key "\t" val; next
		}
		NF { v = $0; gsub(/^[ \t]+/, "", v); print last "\t" v }'
}
mkdir -p /tmp/share
devinfo_norm >/tmp/share/devinfo.txt
echo "$DRIVER" >/tmp/share/driver.txt
echo "# $DRIVER: $(wc -l </tmp/share/devinfo.txt) normalised lines"

if [ "$VM" = 1 ]; then
	python3 -m http.server 8000 --bind "$MY_IP" --directory /tmp/share >/dev/null 2>&1 &
	srv=$!
	retry 30 bash -c "ss -ltnH 'sport = :8000' | grep -q LISTEN"
	barrier served
	barrier compared
	kill "$srv"
else
	barrier served
	fetch() {
		python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
			"http://$PEER_IP:8000/$1"
	}
	compare() {
		local peer fields f rc=0
		peer=$(fetch driver.txt) && fetch devinfo.txt >/tmp/peer-devinfo.txt || return 1
		echo "--- VM 1 ($peer)  +++ VM 2 ($DRIVER), masked:"
		diff /tmp/peer-devinfo.txt /tmp/share/devinfo.txt | sed -n 's/^< /-/p; s/^> /+/p' | tee /tmp/diff.txt
		fields=$(sed 's/^[-+]//; s/\t.*//' /tmp/diff.txt | sort -u)
		if [ "$peer" = "$DRIVER" ]; then
			[ -z "$fields" ] || { echo "same driver, yet reports differ"; return 1; }
			return 0
		fi
		for f in $fields; do
			echo " $ALLOWED " | grep -q " $f " || { echo "field '$f' differs and is not documented"; rc=1; }
		done
		for f in $ALLOWED; do
			echo "$fields" | grep -qx "$f" || { echo "field '$f' is documented as differing but is the same"; rc=1; }
		done
		return $rc
	}
	check "devinfo-same-as-peer" compare
	barrier compared
fi
finish
