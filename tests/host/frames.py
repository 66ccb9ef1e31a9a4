#!/usr/bin/python3
"""tests/host/frames.py LIMIT < objdump -d output: the functions whose stack
frame (the `sub $N,%rsp` of their prologue) is larger than LIMIT bytes, one
a line; exit status 1 if there is any.

The kernel warns of a C function whose frame passes CONFIG_FRAME_WARN (2048
on 64-bit); rustc has no such warning, and the fast kernel's 16 KiB stacks
have no guard page (no VMAP_STACK): a 6 KiB frame in modify_qp, under
`rdma link add`'s deep call chain, once ran off the stack and corrupted the
next task's (2026-12-07).
"""
import re
import sys

limit = int(sys.argv[1])
fn, big = None, []
for line in sys.stdin:
    m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
    if m:
        fn = m.group(1)
        continue
    m = re.search(r"\bsub\s+\$0x([0-9a-f]+),%rsp", line)
    if m and fn and int(m.group(1), 16) > limit:
        big.append((int(m.group(1), 16), fn))
        fn = None
for size, name in sorted(big, reverse=True):
    print(f"{size} bytes: {name}")
sys.exit(1 if big else 0)
