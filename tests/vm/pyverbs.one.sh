# rdma-core's own test suite (pyverbs, 56.1) in full, every module that is
# not vendor-specific, run in one VM first on the C driver (rdma_rxe) and
# then on rrxe, and compared per test: a test the C driver passes must not
# skip, fail, error or hang on rrxe unless it is in the list of features
# rrxe does not have yet (KNOWN below).  Both drivers report driver_id RXE,
# so they are never loaded together: rdma_rxe is unloaded before rrxe comes
# up.  The rrxe run is the only one `make test` makes (it contains the C
# driver's); with DRIVER=rxe the suite runs the C driver alone.
# runs: rrxe@fast
# timeout: 1800

# The modules: every tests/test_*.py but the vendor ones (mlx5, efa, hns,
# bnxt, mana, hbl, irdma: they skip on anything else) and the CUDA one
# (needs a GPU).  Chosen from the list, so a newer rdma-core's new modules
# are run too.
VENDOR_RE='^tests\.test_(mlx5|efa|hns|bnxt|mana|hbl|irdma|cuda)'

# /tmp/pyverbs_run.py OUT DEV GID IDS-FILE: run the listed tests, one
# process per module; a test that makes no progress for TEST_TIMEOUT seconds
# is a `timeout` (its process group is killed).  Writes `TEST-ID OUTCOME`
# lines to OUT (ok, skip, fail, error, timeout) and the output to OUT.log.
cat >/tmp/pyverbs_run.py <<'PY'
import os, re, select, signal, subprocess, sys, time
out, dev, gid, idsfile = sys.argv[1:5]
TEST_TIMEOUT = 120
ids = [l.strip() for l in open(idsfile) if l.strip()]
start = re.compile(r"^(\w+) \((tests\.[\w.]+)\)", re.M)
# The verdict follows " ... ", or starts a line when the test printed.
result = re.compile(r"(?: \.\.\. |^)(ok|skipped|FAIL|ERROR|expected failure|unexpected success)\b", re.M)
norm = {"ok": "ok", "skipped": "skip", "FAIL": "fail", "ERROR": "error",
        "expected failure": "ok", "unexpected success": "fail"}
outcomes, logs = {}, []

def parse(text):
    """({id: outcome} of the finished tests, the id started without a verdict)"""
    done, hits, last = {}, list(start.finditer(text)), None
    for i, m in enumerate(hits):
        end = hits[i + 1].start() if i + 1 < len(hits) else len(text)
        r = result.search(text, m.end(), end)
        if r:
            done[m.group(2)] = norm[r.group(1)]
        else:
            last = m.group(2)
    return done, last

def run(tests):
    """Run TESTS in one process; return ({id: outcome}, the id it died or
    hung in, or None)."""
    p = subprocess.Popen(
        ["python3", "-u", "tests/run_tests.py", "--dev", dev, "--gid", gid, "-v"]
        + [t[len("tests."):] for t in tests],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    text, ndone, progress, killed = "", 0, time.monotonic(), False
    while True:
        r, _, _ = select.select([p.stdout], [], [], 5)
        if r:
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            text += chunk.decode(errors="replace")
            done, _ = parse(text)
            if len(done) != ndone:
                ndone, progress = len(done), time.monotonic()
        elif time.monotonic() - progress > TEST_TIMEOUT:
            os.killpg(p.pid, signal.SIGKILL)
            killed = True
            break
    p.wait()
    logs.append(f"$ run_tests.py {' '.join(tests)}\n{text}\n[exit status {p.returncode}]\n")
    done, last = parse(text)
    if last is not None:
        done[last] = "timeout" if killed else "error"
    return done, (last if not killed else None)

# One process per module, so that one module's leftovers (pyverbs objects
# collected after their context closed: test_flow's make python3 segfault)
# do not hit another's tests.  A process that dies or hangs in a test is
# restarted with the tests after it; a test it died in (not one that hung)
# runs once more alone, so that only a test that crashes by itself is
# charged with the crash.
modules, times = {}, []
for t in ids:
    modules.setdefault(t.split(".")[1], []).append(t)
for mod, tests in modules.items():
    t0 = time.monotonic()
    pending = tests
    while pending:
        done, last = run(pending)
        if last is not None and len(pending) > 1:
            again, _ = run([last])
            done[last] = again.get(last, "error")
        outcomes.update(done)
        rest = [t for t in pending if t not in outcomes]
        if rest == pending:
            for t in rest:
                outcomes[t] = "error"
            rest = []
        pending = rest
    times.append(f"{mod} {time.monotonic() - t0:.0f}")
with open(out + ".times", "w") as f:
    f.write("\n".join(times) + "\n")
with open(out, "w") as f:
    for t in ids:
        f.write(f"{t} {outcomes.get(t, 'error')}\n")
with open(out + ".log", "w") as f:
    f.write("\n".join(logs))
PY

# pyverbs_on DRV: bring DRV up on eth0, run the modules, take it down and
# unload it; outcomes in /tmp/pyverbs.DRV, the output in /tmp/pyverbs.DRV.log
# (both also kept in the run's results folder), seconds per module in
# /tmp/pyverbs.DRV.times.
pyverbs_on() {
	local DRIVER=$1 IBDEV=${1}0 gid t0 rc=0 mod
	mod=$([ "$DRIVER" = rxe ] && echo rdma_rxe || echo rrxe)
	rdma_up || return 1
	gid=$(gid_index "$IBDEV" "$MY_IP") || { echo "no RoCEv2 GID for $MY_IP"; return 1; }
	t0=$(date +%s)
	(cd /tmp/pyverbs && ulimit -l unlimited &&
		python3 /tmp/pyverbs_run.py "/tmp/pyverbs.$DRIVER" "$IBDEV" "$gid" /tmp/pyverbs-ids) || rc=1
	echo "# $DRIVER: $(wc -l <"/tmp/pyverbs.$DRIVER") tests in $(($(date +%s) - t0)) s;" \
		"seconds per module:" $(cat "/tmp/pyverbs.$DRIVER.times")
	cp "/tmp/pyverbs.$DRIVER" "/tmp/pyverbs.$DRIVER.log" "${OUT:-/rrxe/out}/" 2>/dev/null
	rdma link delete "$IBDEV" || rc=1
	modprobe -r "$mod" || rc=1
	return $rc
}

# The suite runs from a copy without the vendor modules: tests/__init__.py
# imports every test_*.py, so each process saves their import time.
list_tests() {
	local f b
	rm -rf /tmp/pyverbs
	mkdir -p /tmp/pyverbs/tests
	for f in /opt/pyverbs/tests/*; do
		b=${f##*/}
		if echo "tests.${b%.py}." | grep -qE "$VENDOR_RE"; then
			echo "# left out: ${b%.py}"
		else
			cp -a "$f" /tmp/pyverbs/tests/
		fi
	done
	(cd /tmp/pyverbs && python3 tests/run_tests.py --list-tests 2>/dev/null) |
		grep '^tests\.test_' | sort >/tmp/pyverbs-ids
	echo "# $(wc -l </tmp/pyverbs-ids) tests in modules:" \
		$(sed 's/^tests\.\([^.]*\)\..*/\1/' /tmp/pyverbs-ids | sort -u)
	[ -s /tmp/pyverbs-ids ]
}
check "pyverbs-list" list_tests

# counts FILE: per module, how many tests ended ok/skip/fail/error/timeout.
counts() {
	awk '{ split($1, p, "."); m = p[2]; n[m " " $2]++; mods[m] = 1; n[$2]++ }
	END { for (m in mods) printf "#   %-22s ok %3d  skip %3d  fail %3d  error %3d  timeout %3d\n",
		m, n[m " ok"], n[m " skip"], n[m " fail"], n[m " error"], n[m " timeout"]
	printf "#   %-22s ok %3d  skip %3d  fail %3d  error %3d  timeout %3d\n", "(all)",
		n["ok"], n["skip"], n["fail"], n["error"], n["timeout"] }' "$1" | sort
}

drivers=rxe
[ "$DRIVER" = rxe ] || drivers="rxe $DRIVER"
for d in $drivers; do
	check "pyverbs-run-$d" pyverbs_on "$d"
	echo "# per-module counts on $d:"
	counts "/tmp/pyverbs.$d"
done

# What rrxe does not do yet, as `TEST-ID REASON`: tests the C driver passes
# that may skip or fail on rrxe.  Any other test the C driver passes must
# pass on rrxe, and a listed test that passes fails the check too, so that
# the list shrinks with the features.  Empty since on-demand paging (the
# seven test_odp tests the C driver passes) came.
KNOWN=$(cat <<'LIST'
LIST
)

# compare: every test the C driver passes passes on the driver under test,
# unless it is listed above; the output of the tests that regressed is shown.
compare() {
	local id rxe_out out why bad=0 known=0
	while read -r id rxe_out; do
		[ "$rxe_out" = ok ] || continue
		out=$(awk -v t="$id" '$1 == t {print $2}' "/tmp/pyverbs.$DRIVER")
		why=$(echo "$KNOWN" | awk -v t="$id" '$1 == t {print $2}')
		if [ "$out" = ok ]; then
			if [ -n "$why" ]; then
				echo "listed as not done ($why) but passes: take it off the list: $id"
				bad=1
			fi
		elif [ -n "$why" ]; then
			echo "known gap ($why): $id ${out:-missing} (C driver: ok)"
			known=$((known + 1))
		else
			echo "REGRESSION: $id ${out:-missing} (C driver: ok)"
			bad=1
		fi
	done <"/tmp/pyverbs.rxe"
	echo "# $known known gaps on $DRIVER"
	if [ $bad -ne 0 ]; then
		echo "output of the failed tests on $DRIVER:"
		awk '/^=====/ {p = 1} /^Ran [0-9]+ test/ {p = 0} p' "/tmp/pyverbs.$DRIVER.log"
	fi
	return $bad
}
[ "$DRIVER" = rxe ] || check "pyverbs-vs-c-driver" compare
finish
