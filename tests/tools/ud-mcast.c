// SPDX-License-Identifier: GPL-2.0
/*
 * ud-mcast: UD multicast through the raw verbs (ibv_attach_mcast), IPv4
 * or IPv6, between two hosts, every datagram checked.  What the RDMA CM's
 * mckey cannot reach: the CM refuses IPv6 joins on RoCEv2.
 *
 *   ud-mcast recv DEV GID_INDEX MGID PORT
 *   ud-mcast send DEV GID_INDEX MGID RECEIVER_IP PORT
 *
 * MGID is an IPv6 multicast address (ff0e::...), or an IPv4 one written
 * as its IPv4-mapped GID (::ffff:239.x.y.z).  The receiver also joins the
 * group at the IP layer (a UDP socket's membership, as the CM's IGMP join
 * does for IPv4): both drivers receive RoCEv2 through a UDP socket, and the
 * IP layer drops multicast of groups the interface has not joined.  A TCP
 * connection orders the two:
 *   attach        the receiver attaches two UD QPs to the group
 *   deliver-qpN   20 datagrams of 1000 bytes, sent one at a time, reach
 *                 both QPs: status, opcode, byte_len (40 + 1000), the GRH
 *                 flag, src_qp, each payload byte, every sequence number
 *                 once; the GRH area holds the IPv6 header (or, for IPv4,
 *                 the IPv4 header in its last 20 bytes) with the group as
 *                 destination and the sender's address as source
 *   destroy-attached  destroying an attached QP fails with EBUSY
 *   detach        the receiver detaches QP 1; 5 more datagrams reach
 *                 QP 0 only (detached-qp1-silent)
 *   send-*        every send completes successfully
 * Each prints "ok NAME-ROLE" or "not ok NAME-ROLE - why"; the exit status
 * is the number of failures (at most 100).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define QKEY 0x11111111u
#define GRH 40
#define SIZE 1000
#define FIRST 20
#define SECOND 5
#define NQP 2
#define SLOTS (FIRST + SECOND)
#define BUF (GRH + SIZE)

static int failures;
static const char *role;

static void result(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("ok %s-%s\n", name, role);
	} else {
		printf("not ok %s-%s - ", name, role);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
		failures++;
	}
	fflush(stdout);
}

static void die(const char *what)
{
	printf("not ok %s-%s - %s\n", what, role, strerror(errno));
	exit(100);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The payload of datagram SEQ: the sequence number, the sender's QPN,
 * then bytes that depend on both. */
static void fill(uint8_t *p, uint32_t seq, uint32_t qpn)
{
	uint32_t i;

	memcpy(p, &seq, 4);
	memcpy(p + 4, &qpn, 4);
	for (i = 8; i < SIZE; i++)
		p[i] = (uint8_t)(i * 7 + seq * 13 + qpn);
}

/* The TCP control connection: one message is a tag byte and 20 bytes. */
struct msg {
	uint8_t tag;
	uint8_t data[20];
};

static void put(int fd, uint8_t tag, const void *data, size_t len)
{
	struct msg m = { .tag = tag };

	memcpy(m.data, data, len);
	if (write(fd, &m, sizeof(m)) != sizeof(m))
		die("control-write");
}

static struct msg get(int fd, uint8_t tag)
{
	struct msg m;
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(m)) {
		n = read(fd, (char *)&m + got, sizeof(m) - got);
		if (n <= 0)
			die("control-read");
		got += n;
	}
	if (m.tag != tag) {
		errno = EPROTO;
		die("control-tag");
	}
	return m;
}

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq[NQP];
	struct ibv_qp *qp[NQP];
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
};

static struct ibv_qp *ud_qp(struct end *e, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = SLOTS,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = QKEY };
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	if (!qp)
		die("create-qp");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		die("modify-init");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("modify-rtr");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify-rts");
	return qp;
}

static void open_end(struct end *e, const char *dev, int gidx)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			break;
	if (!list || !list[i]) {
		errno = ENODEV;
		die("open-device");
	}
	e->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!e->ctx)
		die("open-device");
	if (ibv_query_gid(e->ctx, 1, gidx, &e->gid))
		die("query-gid");
	e->pd = ibv_alloc_pd(e->ctx);
	e->buf = calloc(NQP * SLOTS, BUF);
	if (!e->pd || !e->buf)
		die("alloc");
	e->mr = ibv_reg_mr(e->pd, e->buf, NQP * SLOTS * BUF,
			   IBV_ACCESS_LOCAL_WRITE);
	if (!e->mr)
		die("reg-mr");
	for (i = 0; i < NQP; i++) {
		e->cq[i] = ibv_create_cq(e->ctx, SLOTS + 4, NULL, NULL, 0);
		if (!e->cq[i])
			die("create-cq");
		e->qp[i] = ud_qp(e, e->cq[i]);
	}
}

static int is_v4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, prefix, 12);
}

/* Joins the group at the IP layer on the interface that has ADDR (the
 * socket stays open, and with it the membership). */
static int ip_join(const union ibv_gid *mgid, const char *ifaddr_v4,
		   unsigned int ifindex)
{
	int fd = socket(is_v4(mgid) ? AF_INET : AF_INET6, SOCK_DGRAM, 0);

	if (fd < 0)
		die("ip-join");
	if (is_v4(mgid)) {
		struct ip_mreq m = { 0 };

		memcpy(&m.imr_multiaddr, mgid->raw + 12, 4);
		inet_pton(AF_INET, ifaddr_v4, &m.imr_interface);
		if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)))
			die("ip-join");
	} else {
		struct ipv6_mreq m = { .ipv6mr_interface = ifindex };

		memcpy(&m.ipv6mr_multiaddr, mgid->raw, 16);
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof(m)))
			die("ip-join");
	}
	return fd;
}

static void post_recvs(struct end *e, int q, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)(e->buf + (q * SLOTS + i) * BUF),
			.length = BUF, .lkey = e->mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		if (ibv_post_recv(e->qp[q], &wr, &bad))
			die("post-recv");
	}
}

/* Checks the GRH area of a received datagram: the group as destination,
 * the sender's address as source. */
static const char *check_grh(const uint8_t *g, const union ibv_gid *mgid,
			     const union ibv_gid *sgid)
{
	if (is_v4(mgid)) {
		const uint8_t *ip = g + 20;

		if (ip[0] >> 4 != 4 || ip[9] != IPPROTO_UDP)
			return "not an IPv4/UDP header";
		if (memcmp(ip + 16, mgid->raw + 12, 4))
			return "IPv4 destination is not the group";
		if (memcmp(ip + 12, sgid->raw + 12, 4))
			return "IPv4 source is not the sender";
	} else {
		if (g[0] >> 4 != 6 || g[6] != IPPROTO_UDP)
			return "not an IPv6/UDP header";
		if (memcmp(g + 24, mgid->raw, 16))
			return "IPv6 destination is not the group";
		if (memcmp(g + 8, sgid->raw, 16))
			return "IPv6 source is not the sender";
	}
	return NULL;
}

/* Collects up to WANT datagrams on QP Q within SECS seconds and checks each;
 * SEEN marks the sequence numbers that arrived.  Returns the count. */
static int collect(struct end *e, int q, int want, double secs, int *seen,
		   uint32_t src_qpn, const union ibv_gid *mgid,
		   const union ibv_gid *sgid, char *why, size_t whylen)
{
	double end = now() + secs;
	int got = 0;
	uint8_t expect[SIZE];

	while (got < want && now() < end) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(e->cq[q], 1, &wc);
		const uint8_t *b;
		const char *bad;
		uint32_t seq;

		if (n < 0)
			die("poll-cq");
		if (n == 0) {
			usleep(1000);
			continue;
		}
		got++;
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    wc.byte_len != BUF || !(wc.wc_flags & IBV_WC_GRH) ||
		    wc.src_qp != src_qpn) {
			snprintf(why, whylen, "wc status %d opcode %d byte_len %u flags %#x src_qp %#x",
				 wc.status, wc.opcode, wc.byte_len, wc.wc_flags, wc.src_qp);
			continue;
		}
		b = e->buf + (q * SLOTS + wc.wr_id) * BUF;
		bad = check_grh(b, mgid, sgid);
		if (bad) {
			snprintf(why, whylen, "%s", bad);
			continue;
		}
		memcpy(&seq, b + GRH, 4);
		if (seq >= SLOTS || seen[seq]) {
			snprintf(why, whylen, "sequence %u unexpected or twice", seq);
			continue;
		}
		seen[seq] = 1;
		fill(expect, seq, src_qpn);
		if (memcmp(b + GRH, expect, SIZE))
			snprintf(why, whylen, "payload of %u differs", seq);
	}
	return got;
}

static int all_seen(const int *seen, int from, int to)
{
	int i;

	for (i = from; i < to; i++)
		if (!seen[i])
			return 0;
	return 1;
}

static void receiver(const char *dev, int gidx, union ibv_gid *mgid, int port)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
				   .sin6_port = htons(port) };
	int lfd, fd, one = 1, q, seen[NQP][SLOTS] = { 0 }, n;
	char why[NQP][160] = { "" }, addr4[INET_ADDRSTRLEN] = "0.0.0.0";
	struct end e = { 0 };
	union ibv_gid sgid;
	uint32_t src_qpn;
	struct msg m;

	open_end(&e, dev, gidx);
	if (is_v4(mgid))
		inet_ntop(AF_INET, e.gid.raw + 12, addr4, sizeof(addr4));
	ip_join(mgid, addr4, if_nametoindex("eth0"));
	for (q = 0; q < NQP; q++) {
		post_recvs(&e, q, SLOTS);
		errno = ibv_attach_mcast(e.qp[q], mgid, 0);
		result(!errno, q ? "attach-qp1" : "attach-qp0", "%s", strerror(errno));
	}
	errno = ibv_destroy_qp(e.qp[0]);
	result(errno == EBUSY, "destroy-attached", "ibv_destroy_qp: %s, want EBUSY",
	       strerror(errno));

	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		die("listen");
	printf("# listening on %d\n", port);
	fflush(stdout);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	m = get(fd, 'H');
	memcpy(&src_qpn, m.data, 4);
	memcpy(sgid.raw, m.data + 4, 16);
	put(fd, 'R', NULL, 0);

	/* Round 1: both QPs get every datagram. */
	get(fd, 'S');
	for (q = 0; q < NQP; q++) {
		n = collect(&e, q, FIRST, 10, seen[q], src_qpn, mgid, &sgid,
			    why[q], sizeof(why[q]));
		result(n == FIRST && all_seen(seen[q], 0, FIRST) && !why[q][0],
		       q ? "deliver-qp1" : "deliver-qp0", "%d of %d datagrams; %s",
		       n, FIRST, why[q]);
	}

	/* Round 2: QP 1 detached, QP 0 alone receives. */
	errno = ibv_detach_mcast(e.qp[1], mgid, 0);
	result(!errno, "detach", "%s", strerror(errno));
	put(fd, 'D', NULL, 0);
	get(fd, 'S');
	why[0][0] = 0;
	n = collect(&e, 0, SECOND, 10, seen[0], src_qpn, mgid, &sgid, why[0],
		    sizeof(why[0]));
	result(n == SECOND && all_seen(seen[0], FIRST, SLOTS) && !why[0][0],
	       "detached-qp0-receives", "%d of %d datagrams; %s", n, SECOND, why[0]);
	n = collect(&e, 1, SECOND, 1, seen[1], src_qpn, mgid, &sgid, why[1],
		    sizeof(why[1]));
	result(n == 0, "detached-qp1-silent", "%d datagrams after the detach", n);
	put(fd, 'E', NULL, 0);

	errno = ibv_detach_mcast(e.qp[0], mgid, 0);
	result(!errno, "detach-last", "%s", strerror(errno));
	for (q = 0; q < NQP; q++) {
		errno = ibv_destroy_qp(e.qp[q]);
		result(!errno, q ? "destroy-qp1" : "destroy-qp0", "%s", strerror(errno));
	}
}

static void send_round(struct end *e, struct ibv_ah *ah, uint32_t from,
		       uint32_t to, const char *name)
{
	uint32_t seq;
	char why[160] = "";

	for (seq = from; seq < to; seq++) {
		uint8_t *p = e->buf + seq * BUF;
		struct ibv_sge sge = { .addr = (uintptr_t)p, .length = SIZE,
				       .lkey = e->mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = seq, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
			.wr.ud = { .ah = ah, .remote_qpn = 0xffffff,
				   .remote_qkey = QKEY },
		}, *bad;
		struct ibv_wc wc;
		double end = now() + 10;
		int n = 0;

		fill(p, seq, e->qp[0]->qp_num);
		if (ibv_post_send(e->qp[0], &wr, &bad))
			die("post-send");
		/* One at a time: a datagram is on the wire before the next. */
		while (n == 0 && now() < end) {
			n = ibv_poll_cq(e->cq[0], 1, &wc);
			if (n < 0)
				die("poll-cq");
		}
		if (n == 0 || wc.status != IBV_WC_SUCCESS || wc.wr_id != seq) {
			snprintf(why, sizeof(why), "datagram %u: %s", seq,
				 n ? ibv_wc_status_str(wc.status) : "no completion in 10 s");
			break;
		}
	}
	result(!why[0], name, "%s", why);
}

static void sender(const char *dev, int gidx, union ibv_gid *mgid,
		   const char *peer, int port)
{
	struct end e = { 0 };
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = *mgid, .sgid_index = gidx, .hop_limit = 64 },
	};
	struct sockaddr_storage ss = { 0 };
	struct ibv_ah *ah;
	uint8_t hello[20];
	double end = now() + 60;
	int fd = -1;

	open_end(&e, dev, gidx);
	ah = ibv_create_ah(e.pd, &aa);
	if (!ah)
		die("create-ah");
	if (inet_pton(AF_INET, peer, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		ss.ss_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, peer, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		ss.ss_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
	} else {
		errno = EINVAL;
		die("peer-address");
	}
	/* The receiver may not listen yet. */
	while (now() < end) {
		fd = socket(ss.ss_family, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, (struct sockaddr *)&ss, sizeof(ss)))
			break;
		close(fd);
		fd = -1;
		sleep(1);
	}
	if (fd < 0)
		die("connect");
	memcpy(hello, &e.qp[0]->qp_num, 4);
	memcpy(hello + 4, e.gid.raw, 16);
	put(fd, 'H', hello, sizeof(hello));
	get(fd, 'R');
	send_round(&e, ah, 0, FIRST, "send-round1");
	put(fd, 'S', NULL, 0);
	get(fd, 'D');
	send_round(&e, ah, FIRST, SLOTS, "send-round2");
	put(fd, 'S', NULL, 0);
	get(fd, 'E');
	errno = ibv_destroy_ah(ah);
	result(!errno, "destroy-ah", "%s", strerror(errno));
}

int main(int argc, char **argv)
{
	union ibv_gid mgid;

	if (argc < 6 || (strcmp(argv[1], "recv") && strcmp(argv[1], "send")) ||
	    (!strcmp(argv[1], "send") && argc < 7)) {
		fprintf(stderr, "usage: ud-mcast recv DEV GID_INDEX MGID PORT\n"
				"       ud-mcast send DEV GID_INDEX MGID RECEIVER_IP PORT\n");
		return 100;
	}
	role = argv[1];
	if (inet_pton(AF_INET6, argv[4], mgid.raw) != 1) {
		errno = EINVAL;
		die("mgid");
	}
	if (!strcmp(role, "recv"))
		receiver(argv[2], atoi(argv[3]), &mgid, atoi(argv[5]));
	else
		sender(argv[2], atoi(argv[3]), &mgid, argv[5], atoi(argv[6]));
	return failures > 100 ? 100 : failures;
}
