# The barrier server of VM 1 (qemu/guest/lib.sh, barrier): started once a
# boot, so that meeting the peer costs no new process in either VM.  A
# Python start takes most of a second on the debug kernel (0.76 s warm,
# measured 2026-12-07), and pair suites meet for each client-server case.
#
# A client sends one line, "wait ID VM" or "try ID VM", and reads one line.
# "wait" is answered "go" once both VMs wait at ID; "try" (barrier_reached)
# is answered "go" when the other VM already waits at ID and "no"
# otherwise.  A client that gives up (its read timed out) closes its
# connection and is forgotten.
import selectors
import socket
import sys

srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("", int(sys.argv[1])))
srv.listen(64)
sel = selectors.DefaultSelector()
sel.register(srv, selectors.EVENT_READ)
pending = {}   # connection -> bytes of its request so far
waiting = {}   # ID -> {VM: connection}
where = {}     # connection -> (ID, VM) while it waits


def drop(c):
    # Once only: a connection answered and closed while handling another
    # may still be in the same select() result.
    if c not in pending:
        return
    at = where.pop(c, None)
    if at is not None:
        w = waiting.get(at[0], {})
        if w.get(at[1]) is c:
            del w[at[1]]
        if not w:
            waiting.pop(at[0], None)
    pending.pop(c, None)
    sel.unregister(c)
    c.close()


def answer(c, word):
    try:
        c.sendall(word + b"\n")
    except OSError:
        pass
    drop(c)


def request(c, line):
    try:
        verb, bid, vm = line.decode().split()
    except ValueError:
        return answer(c, b"bad")
    w = waiting.setdefault(bid, {})
    other = [v for v in w if v != vm]
    if verb == "try" and not other:
        if not w:
            del waiting[bid]
        return answer(c, b"no")
    old = w.get(vm)
    if old is not None:
        drop(old)
        w = waiting.setdefault(bid, {})
    w[vm] = c
    where[c] = (bid, vm)
    if other:
        for p in list(w.values()):
            answer(p, b"go")


def serve(key):
    if key.fileobj is srv:
        c, _ = srv.accept()
        pending[c] = b""
        sel.register(c, selectors.EVENT_READ)
        return
    c = key.fileobj
    if c not in pending:
        return
    try:
        data = c.recv(256)
    except OSError:
        data = b""
    if not data:
        drop(c)
        return
    if c in where:
        return
    pending[c] += data
    if b"\n" in pending[c]:
        request(c, pending[c].split(b"\n", 1)[0])


while True:
    for key, _ in sel.select():
        # A bug here must not end the boot's barriers: said, and served on.
        try:
            serve(key)
        except Exception as e:
            print("barrierd:", repr(e), file=sys.stderr, flush=True)
