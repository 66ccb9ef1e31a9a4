// SPDX-License-Identifier: GPL-2.0
/*
 * rrxe-perf: wall-clock RC throughput and latency over the stock libibverbs.
 *
 * perftest times with the CPU cycle counter, which reads zero under QEMU's
 * TCG; this program times with CLOCK_MONOTONIC instead, so that rrxe and the
 * C driver can be compared between two TCG guests.  One process is the
 * server (no host argument), the other the client; they exchange QP numbers,
 * PSNs, GIDs and buffer keys over TCP, like ibv_rc_pingpong.
 *
 *   rrxe-perf -d DEV -g GIDIDX                        (server)
 *   rrxe-perf -d DEV -g GIDIDX -t TEST -s BYTES -q QPS -n MSGS [-e] HOST   (client)
 *
 * TEST is write, read or send (throughput: every QP keeps -w messages in
 * flight until -n messages per QP completed or, with -T MILLIS, until
 * MILLIS of wall clock have passed, then waits for the messages in flight),
 * or lat_send / lat_write (ping-pong of -s bytes, one message in flight, -n
 * round trips or, with -T, MILLIS of them).  The client prints one
 * line:  RESULT test=.. size=.. qps=.. msgs=.. seconds=.. MBps=.. kmsgps=..
 * and, for latency tests, usec_mean (the run's time per round trip, halved)
 * and usec_median/min/max of the single round trips, halved.
 *
 * With -e the client waits for its completions on a completion channel
 * (ibv_req_notify_cq, then ibv_get_cq_event once the CQ is empty) instead
 * of polling without pause, as an event-driven consumer does; the server
 * always polls.  The RESULT line says mode=event or mode=poll.
 *
 * Three tests need no peer and run without a host argument; they measure
 * the control path:
 *   mr_reg   ibv_reg_mr and ibv_dereg_mr of -s bytes (touched, page
 *            aligned), repeated for -T MILLIS (at least once):
 *            usec_reg and usec_dereg, the mean time of each call;
 *   qp_rate  ibv_create_qp and ibv_destroy_qp of an RC QP (16 send and
 *            receive WRs, one SGE) for -T MILLIS: kqps, thousands of
 *            create+destroy pairs per second;
 *   qp_mem   -q RC QPs of 256 send and 256 receive WRs created, and what
 *            /proc/meminfo's Slab, VmallocUsed and MemFree moved per QP,
 *            in KiB (slab_kib, vmalloc_kib, memfree_kib): kernel memory
 *            per QP, the driver's and ib_core's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_QPS 256

struct params {		/* sent by the client, in network byte order */
	uint32_t test, size, qps, msgs, window, millis;
};

struct qp_info {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

enum { T_WRITE, T_READ, T_SEND, T_LAT_SEND, T_LAT_WRITE, T_MR_REG, T_QP_RATE, T_QP_MEM, T_COUNT };
static const char *test_names[] = { "write", "read", "send", "lat_send", "lat_write",
				    "mr_reg", "qp_rate", "qp_mem" };

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_comp_channel *channel;	/* -e: wait for completions */
static struct ibv_mr *mr;
static struct ibv_qp *qp[MAX_QPS];
static char *buf;
static size_t slot;		/* bytes of buffer per QP */
static struct params p;
static int events;		/* -e (client only) */

static void die(const char *what)
{
	fprintf(stderr, "rrxe-perf: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void xfer(int fd, void *data, size_t len, int sending)
{
	char *c = data;

	while (len) {
		ssize_t n = sending ? write(fd, c, len) : read(fd, c, len);

		if (n <= 0)
			die(sending ? "tcp write" : "tcp read");
		c += n;
		len -= n;
	}
}

static int tcp_connect(const char *host, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, tries;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "rrxe-perf: bad IPv4 address %s\n", host);
		exit(1);
	}
	for (tries = 0; tries < 600; tries++) {	/* the server may not listen yet */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			die("socket");
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		close(fd);
		usleep(100000);
	}
	die("connect");
	return -1;
}

static int tcp_accept(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, lfd, fd;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		die("bind/listen");
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(lfd);
	return fd;
}

static void open_device(const char *dev)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	uint32_t i;

	for (i = 0; list && list[i]; i++)
		if (!dev || !strcmp(ibv_get_device_name(list[i]), dev))
			break;
	if (!list || !list[i]) {
		fprintf(stderr, "rrxe-perf: device %s not found\n", dev ? dev : "(any)");
		exit(1);
	}
	ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	ibv_free_device_list(list);
}

static struct ibv_qp *create_rc_qp(struct ibv_cq *c, uint32_t wrs)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = c, .recv_cq = c, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = wrs, .max_recv_wr = wrs, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *q = ibv_create_qp(pd, &ia);

	if (!q)
		die("ibv_create_qp");
	return q;
}

static void setup(const char *dev, int gid_idx, struct qp_info *mine)
{
	struct ibv_device_attr dev_attr;
	union ibv_gid gid;
	uint32_t i, cqe;

	open_device(dev);
	slot = (size_t)p.size * (p.window ? p.window : 1);
	slot = (slot + 4095) & ~(size_t)4095;
	if (posix_memalign((void **)&buf, 4096, slot * p.qps))
		die("posix_memalign");
	memset(buf, 0, slot * p.qps);
	mr = ibv_reg_mr(pd, buf, slot * p.qps, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("ibv_reg_mr");
	if (events) {
		channel = ibv_create_comp_channel(ctx);
		if (!channel)
			die("ibv_create_comp_channel");
	}
	if (ibv_query_device(ctx, &dev_attr))
		die("ibv_query_device");
	cqe = p.qps * (2 * p.window + 2) + 16;
	if (cqe > (uint32_t)dev_attr.max_cqe) {
		fprintf(stderr, "rrxe-perf: %u QPs of %u messages need %u CQEs, the device has %d\n",
			p.qps, p.window, cqe, dev_attr.max_cqe);
		exit(1);
	}
	cq = ibv_create_cq(ctx, cqe, NULL, channel, 0);
	if (!cq)
		die("ibv_create_cq");
	if (ibv_query_gid(ctx, 1, gid_idx, &gid))
		die("ibv_query_gid");
	for (i = 0; i < p.qps; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT, .port_num = 1,
			.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		};

		qp[i] = create_rc_qp(cq, p.window + 1);
		if (ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			die("modify QP to INIT");
		mine[i].qpn = htonl(qp[i]->qp_num);
		mine[i].psn = htonl(lrand48() & 0xffffff);
		mine[i].rkey = htonl(mr->rkey);
		mine[i].addr = htobe64((uintptr_t)buf + i * slot);
		memcpy(mine[i].gid, &gid, 16);
	}
}

static void connect_qps(int gid_idx, struct qp_info *mine, struct qp_info *peer)
{
	struct ibv_port_attr port;
	uint32_t i;

	if (ibv_query_port(ctx, 1, &port))
		die("ibv_query_port");
	for (i = 0; i < p.qps; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR, .path_mtu = port.active_mtu,
			.dest_qp_num = ntohl(peer[i].qpn), .rq_psn = ntohl(peer[i].psn),
			.max_dest_rd_atomic = 16, .min_rnr_timer = 1,
			.ah_attr = { .is_global = 1, .port_num = 1,
				     .grh = { .hop_limit = 64, .sgid_index = gid_idx } },
		};

		memcpy(&a.ah_attr.grh.dgid, peer[i].gid, 16);
		if (ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			die("modify QP to RTR");
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = ntohl(mine[i].psn);
		a.max_rd_atomic = 16;
		if (ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
			die("modify QP to RTS");
	}
}

static void post_recv(uint32_t i, uint32_t n)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf + i * slot + (n % p.window) * p.size,
			       .length = p.size, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp[i], &wr, &bad))
		die("ibv_post_recv");
}

/* Post one signaled WR on QP i from local offset loff to remote offset roff. */
static void post_at(uint32_t i, size_t loff, size_t roff, int op, struct qp_info *peer)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf + i * slot + loff, .length = p.size,
			       .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (op != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = be64toh(peer[i].addr) + roff;
		wr.wr.rdma.rkey = ntohl(peer[i].rkey);
	}
	if (ibv_post_send(qp[i], &wr, &bad))
		die("ibv_post_send");
}

static void post_send(uint32_t i, uint32_t n, int op, struct qp_info *peer)
{
	size_t off = (n % p.window) * p.size;

	post_at(i, off, off, op, peer);
}

/*
 * Poll one batch; return the completions, fail on any error status.  With a
 * completion channel an empty CQ is armed, polled once more (a completion
 * may have come before the arming) and then waited for, so the call returns
 * at least one completion.
 */
static int poll(struct ibv_wc *wc, int max)
{
	int n = ibv_poll_cq(cq, max, wc), k, errors;

	while (channel && n == 0) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;

		if (ibv_req_notify_cq(cq, 0))
			die("ibv_req_notify_cq");
		n = ibv_poll_cq(cq, max, wc);
		if (n)
			break;
		if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx))
			die("ibv_get_cq_event");
		ibv_ack_cq_events(ev_cq, 1);
		n = ibv_poll_cq(cq, max, wc);
	}
	if (n < 0)
		die("ibv_poll_cq");
	/* Every error of the batch, not only the first: a flush error
	 * may come before the completion that says why. */
	for (k = 0, errors = 0; k < n; k++)
		if (wc[k].status != IBV_WC_SUCCESS) {
			fprintf(stderr, "rrxe-perf: completion error %s (qp %lu)\n",
				ibv_wc_status_str(wc[k].status), (unsigned long)wc[k].wr_id);
			errors++;
		}
	if (errors)
		exit(1);
	return n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void run_bw(int client, int fd, struct qp_info *peer)
{
	static const int ops[] = { IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ, IBV_WR_SEND };
	uint32_t posted[MAX_QPS] = { 0 }, done[MAX_QPS] = { 0 }, total = 0, i;
	struct ibv_wc wc[64];
	double t0, t;
	int n, k;

	if (!client) {		/* only SEND needs the server's receives */
		uint32_t want[MAX_QPS];
		size_t have = 0;

		/* Timed runs: the client sends how many messages each QP sent
		 * once it is done; until then every receive is reposted. */
		for (i = 0; i < p.qps; i++) {
			want[i] = p.millis ? UINT32_MAX : p.msgs;
			for (posted[i] = 0; posted[i] < p.window && posted[i] < want[i]; posted[i]++)
				post_recv(i, posted[i]);
		}
		for (int idle = 0;; ) {
			for (i = 0; i < p.qps && done[i] >= want[i]; i++)
				;
			if (i == p.qps)
				break;
			/* A system call: every 64th empty poll only. */
			if (p.millis && have < sizeof(want[0]) * p.qps && idle++ % 64 == 0) {
				ssize_t r = recv(fd, (char *)want + have,
						 sizeof(want[0]) * p.qps - have, MSG_DONTWAIT);

				if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
					die("tcp read");
				if (r > 0)
					have += r;
				if (have == sizeof(want[0]) * p.qps)
					for (i = 0; i < p.qps; i++)
						want[i] = ntohl(want[i]);
			}
			n = poll(wc, 64);
			for (k = 0; k < n; k++) {
				i = wc[k].wr_id;
				done[i]++;
				if (posted[i] < want[i])
					post_recv(i, posted[i]++);
			}
		}
		return;
	}
	t0 = now();
	for (i = 0; i < p.qps; i++)
		for (; posted[i] < p.window && posted[i] < p.msgs; posted[i]++)
			post_send(i, posted[i], ops[p.test], peer);
	for (int more = 1, idle = 0;;) {
		uint32_t out = 0;

		/* Without a vDSO clock (jiffies under TCG) every clock read is a
		 * system call: read it after completions and every 64th empty
		 * poll, not on every turn of the loop. */
		if (p.millis && more && idle % 64 == 0)
			more = now() - t0 < p.millis / 1e3;

		for (i = 0; i < p.qps; i++)
			out += posted[i] - done[i];
		if (!out && !more)
			break;
		if (!p.millis && total == p.qps * p.msgs)
			break;
		n = poll(wc, 64);
		idle = n ? 0 : idle + 1;
		for (k = 0; k < n; k++) {
			i = wc[k].wr_id;
			done[i]++;
			total++;
			if (more && (p.millis || posted[i] < p.msgs))
				post_send(i, posted[i]++, ops[p.test], peer);
		}
	}
	t = now() - t0;
	if (p.millis && p.test == T_SEND) {
		uint32_t sent[MAX_QPS];

		for (i = 0; i < p.qps; i++)
			sent[i] = htonl(posted[i]);
		xfer(fd, sent, sizeof(sent[0]) * p.qps, 1);
	}
	printf("RESULT test=%s size=%u qps=%u msgs=%u seconds=%.3f MBps=%.3f kmsgps=%.3f mode=%s\n",
	       test_names[p.test], p.size, p.qps, total, t,
	       (double)total * p.size / t / 1e6, total / t / 1e3, events ? "event" : "poll");
}

/*
 * Completions seen but not yet waited for, by kind (the ping-pong's
 * receives and its own sends or WRITEs).
 */
static uint32_t recvs_seen, sends_seen;

/* Wait until `recvs` receive and `sends` send completions were seen. */
static void wait_completions(uint32_t recvs, uint32_t sends)
{
	struct ibv_wc wc[4];
	int n, k;

	while (recvs_seen < recvs || sends_seen < sends) {
		n = poll(wc, 4);
		for (k = 0; k < n; k++) {
			if (wc[k].opcode & IBV_WC_RECV)
				recvs_seen++;
			else
				sends_seen++;
		}
	}
	recvs_seen -= recvs;
	sends_seen -= sends;
}

/*
 * Ping-pong of -s bytes on QP 0.  The last byte of every message carries a
 * tag (1..127, the iteration's) so that a WRITE's arrival can be seen in
 * memory; its top bit marks the client's last message, which the server
 * echoes and then stops.  Counted (-n) or timed (-T): the client sets the
 * bit once -n round trips or MILLIS of wall clock are reached.  The guest
 * clock may tick in jiffies (4 ms under TCG), so the figure that counts is
 * usec_mean = the whole run's time over its round trips, halved; the
 * per-trip median/min/max are as coarse as the clock.
 *
 * SEND ping-pong keeps a spare receive posted on both sides, and each side
 * posts the next one as soon as a message arrived, before it answers (as
 * ibv_rc_pingpong does): the peer's next message can follow the ACK of this
 * side's answer at once, and without a receive waiting it would meet an RNR
 * NAK and the RNR timer, which is not what the case measures.
 */
static void run_lat(int client, struct qp_info *peer)
{
	volatile char *mine_last = buf + p.size - 1;
	size_t cap = p.millis ? 1 << 20 : p.msgs;
	double *rtt = client ? calloc(cap, sizeof(double)) : NULL, start, t0;
	uint32_t it;
	int last = 0;

	if (client && !rtt)
		die("calloc");
	if (p.test == T_LAT_SEND) {	/* both receives land in the same slot */
		post_recv(0, 0);
		post_recv(0, 0);
	}
	/* The clock is read by the client only, once per round trip (without
	 * a vDSO clock each read is a system call): the end of one trip is the
	 * start of the next. */
	start = t0 = now();
	for (it = 0; !last; it++) {
		char tag = (char)(it % 127 + 1);

		if (client) {
			last = p.millis ? it + 1 >= cap || t0 - start >= p.millis / 1e3
					: it + 1 >= p.msgs;
			if (last)
				tag |= (char)0x80;
		}
		if (p.test == T_LAT_SEND) {
			if (client) {
				buf[p.size - 1] = tag;
				post_send(0, 0, IBV_WR_SEND, peer);
				wait_completions(1, 1);	/* own send, the echo */
				post_recv(0, 0);
			} else {
				wait_completions(1, 0);	/* the ping */
				post_recv(0, 0);
				last = buf[p.size - 1] & 0x80;
				post_send(0, 0, IBV_WR_SEND, peer);
				wait_completions(0, 1);
			}
		} else {
			/* Write from the second half of the buffer into the peer's
			 * first half; the peer watches the last byte of its first
			 * half for this iteration's tag. */
			if (client) {
				buf[2 * p.size - 1] = tag;
				post_at(0, p.size, 0, IBV_WR_RDMA_WRITE, peer);
			}
			while ((*mine_last & 0x7f) != (tag & 0x7f))
				;
			if (!client) {
				last = *mine_last & 0x80;
				buf[2 * p.size - 1] = *mine_last;
				post_at(0, p.size, 0, IBV_WR_RDMA_WRITE, peer);
			}
			wait_completions(0, 1);
		}
		if (client) {
			double t = now();

			rtt[it] = t - t0;
			t0 = t;
		}
	}
	if (client) {
		double total = now() - start;

		qsort(rtt, it, sizeof(double), cmp_double);
		printf("RESULT test=%s size=%u qps=1 msgs=%u seconds=%.3f usec_mean=%.1f"
		       " usec_median=%.1f usec_min=%.1f usec_max=%.1f mode=%s\n",
		       test_names[p.test], p.size, it, total, total / it / 2 * 1e6,
		       rtt[it / 2] / 2 * 1e6, rtt[0] / 2 * 1e6, rtt[it - 1] / 2 * 1e6,
		       events ? "event" : "poll");
	}
	free(rtt);
}

/* One /proc/meminfo field, in KiB. */
static long meminfo(const char *name)
{
	FILE *f = fopen("/proc/meminfo", "r");
	size_t len = strlen(name);
	char line[256];
	long v = -1;

	if (!f)
		die("/proc/meminfo");
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, len) && line[len] == ':') {
			v = atol(line + len + 1);
			break;
		}
	fclose(f);
	if (v < 0) {
		fprintf(stderr, "rrxe-perf: no %s in /proc/meminfo\n", name);
		exit(1);
	}
	return v;
}

/* The tests without a peer (see the header). */
static void run_local(const char *dev)
{
	double t0, t, reg = 0, dereg = 0;
	uint32_t n = 0, i;

	open_device(dev);
	if (p.test == T_MR_REG) {
		/* MAP_POPULATE touches every page: the figure is registration
		 * (pinning, the page table), not first-touch faults. */
		char *b = mmap(NULL, p.size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

		if (b == MAP_FAILED)
			die("mmap");
		/* Timed in batches of registrations of the same memory, then
		 * their deregistrations: without a vDSO clock each clock read
		 * is a system call, as long as a small registration. */
		uint32_t batch = p.size >= (16u << 20) ? 1 : (16u << 20) / p.size;
		struct ibv_mr *m[64];

		if (batch > 64)
			batch = 64;
		t0 = now();
		do {
			t = now();
			for (i = 0; i < batch; i++) {
				m[i] = ibv_reg_mr(pd, b, p.size, IBV_ACCESS_LOCAL_WRITE |
						  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
				if (!m[i])
					die("ibv_reg_mr");
			}
			reg += now() - t;
			t = now();
			for (i = 0; i < batch; i++)
				if (ibv_dereg_mr(m[i]))
					die("ibv_dereg_mr");
			dereg += now() - t;
			n += batch;
		} while (now() - t0 < p.millis / 1e3 && n < 100000);
		t = now() - t0;
		printf("RESULT test=mr_reg size=%u qps=1 msgs=%u seconds=%.3f usec_reg=%.1f usec_dereg=%.1f\n",
		       p.size, n, t, reg / n * 1e6, dereg / n * 1e6);
		munmap(b, p.size);
		return;
	}
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);	/* the QP tests' */
	if (!cq)
		die("ibv_create_cq");
	if (p.test == T_QP_RATE) {
		t0 = now();
		do {
			if (ibv_destroy_qp(create_rc_qp(cq, 16)))
				die("ibv_destroy_qp");
			n++;
		} while (n % 16 || now() - t0 < p.millis / 1e3);
		t = now() - t0;
		printf("RESULT test=qp_rate size=0 qps=1 msgs=%u seconds=%.3f kqps=%.3f usec_mean=%.1f\n",
		       n, t, n / t / 1e3, t / n * 1e6);
	} else {
		long slab, vmalloc, mfree;

		slab = meminfo("Slab"), vmalloc = meminfo("VmallocUsed"), mfree = meminfo("MemFree");
		for (i = 0; i < p.qps; i++)
			qp[i] = create_rc_qp(cq, 256);
		slab = meminfo("Slab") - slab, vmalloc = meminfo("VmallocUsed") - vmalloc;
		mfree = mfree - meminfo("MemFree");
		for (i = 0; i < p.qps; i++)
			if (ibv_destroy_qp(qp[i]))
				die("ibv_destroy_qp");
		printf("RESULT test=qp_mem size=0 qps=%u msgs=%u seconds=0 slab_kib=%.1f vmalloc_kib=%.1f"
		       " memfree_kib=%.1f\n", p.qps, p.qps, (double)slab / p.qps,
		       (double)vmalloc / p.qps, (double)mfree / p.qps);
	}
}

int main(int argc, char **argv)
{
	struct qp_info mine[MAX_QPS], peer[MAX_QPS];
	const char *dev = NULL, *test = "write";
	int gid_idx = 1, port = 18600, c, fd, client, t;
	struct params wire;
	char done = 1;

	p = (struct params){ .size = 65536, .qps = 1, .msgs = 1000, .window = 16 };
	while ((c = getopt(argc, argv, "d:g:t:s:q:n:w:p:T:e")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'g': gid_idx = atoi(optarg); break;
		case 't': test = optarg; break;
		case 's': p.size = strtoul(optarg, NULL, 0); break;
		case 'q': p.qps = strtoul(optarg, NULL, 0); break;
		case 'n': p.msgs = strtoul(optarg, NULL, 0); break;
		case 'w': p.window = strtoul(optarg, NULL, 0); break;
		case 'p': port = atoi(optarg); break;
		case 'T': p.millis = strtoul(optarg, NULL, 0); break;
		case 'e': events = 1; break;
		default:
			fprintf(stderr, "usage: rrxe-perf [-d dev] [-g gid] [-t write|read|send|lat_send|lat_write|mr_reg|qp_rate|qp_mem]"
				" [-s bytes] [-q qps] [-n msgs] [-w window] [-T millis] [-e] [-p port] [server]\n");
			return 2;
		}
	}
	client = optind < argc;
	events &= client;
	for (t = 0; t < T_COUNT && strcmp(test, test_names[t]); t++)
		;
	if (t == T_COUNT || !p.size || !p.qps || p.qps > MAX_QPS || !p.msgs || !p.window) {
		fprintf(stderr, "rrxe-perf: bad test or size\n");
		return 2;
	}
	p.test = t;
	if (p.test >= T_MR_REG) {
		run_local(dev);
		return 0;
	}
	srand48(getpid() * now());
	if (client) {
		fd = tcp_connect(argv[optind], port);
		wire = (struct params){ htonl(p.test), htonl(p.size), htonl(p.qps),
					htonl(p.msgs), htonl(p.window), htonl(p.millis) };
		xfer(fd, &wire, sizeof(wire), 1);
	} else {
		fd = tcp_accept(port);
		xfer(fd, &wire, sizeof(wire), 0);
		p = (struct params){ ntohl(wire.test), ntohl(wire.size), ntohl(wire.qps),
				     ntohl(wire.msgs), ntohl(wire.window), ntohl(wire.millis) };
		if (!p.size || !p.qps || p.qps > MAX_QPS || !p.msgs || !p.window || p.test > T_LAT_WRITE) {
			fprintf(stderr, "rrxe-perf: bad parameters from client\n");
			return 1;
		}
	}
	if (p.test >= T_LAT_SEND)	/* one QP; two message slots (lat_write) */
		p.qps = 1, p.window = 2;
	setup(dev, gid_idx, mine);
	xfer(fd, mine, sizeof(mine[0]) * p.qps, 1);
	xfer(fd, peer, sizeof(peer[0]) * p.qps, 0);
	connect_qps(gid_idx, mine, peer);
	xfer(fd, &done, 1, 1);	/* both sides are at RTS */
	xfer(fd, &done, 1, 0);
	if (p.test >= T_LAT_SEND)
		run_lat(client, peer);
	else if (client || p.test == T_SEND)
		run_bw(client, fd, peer);
	xfer(fd, &done, 1, 1);	/* keep the buffers until the peer is done */
	xfer(fd, &done, 1, 0);
	close(fd);
	return 0;
}
