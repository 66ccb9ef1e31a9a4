// SPDX-License-Identifier: GPL-2.0
// build: -lucp -lucs
/*
 * ucp-check: UCX's UCP API between two hosts, every byte checked (what
 * ucx_perftest does not do: it measures, and never looks at the data).
 *
 *   ucp-check server PORT
 *   ucp-check client SERVER_IP PORT
 *
 * The transport is UCX's choice within UCX_TLS and UCX_NET_DEVICES (the
 * suite sets rc_verbs or ud_verbs and the RDMA device).  The two exchange
 * their worker addresses, and the server its memory's address and packed
 * rkey, over one TCP connection, then:
 *   tag-SIZE   the client sends a pattern of SIZE bytes (eager to
 *              rendezvous sizes), the server checks it and answers with
 *              another pattern, which the client checks
 *   put        the client writes ranges of the server's 8 MiB region
 *              (ucp_put_nbx, then a flush); the server checks the whole
 *              region against what it must hold
 *   get        the client reads ranges of the region (filled by the
 *              server with a known pattern) and checks them
 *   amo-*      64-bit atomics on a word of the region: 100 fetch-adds,
 *              each returning the previous value; a compare-swap that
 *              matches and one that does not; a swap; the server checks
 *              the final word
 * Each prints "ok NAME" or "not ok NAME - why"; the exit status is the
 * number of failures (at most 100).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
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

#include <ucp/api/ucp.h>

#define REGION (8u << 20)
#define AMO_OFF (REGION - 64)
#define AMO_START 0x7000000000000000ull
#define FETCH_ADDS 100

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

static void die(const char *what, const char *why)
{
	printf("not ok %s-%s - %s\n", what, role, why);
	fflush(stdout);
	exit(100);
}

static uint8_t pattern_byte(uint32_t seed, size_t i)
{
	return (uint8_t)(i * 13 + seed * 7 + (i >> 8));
}

static void fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

/* The first byte that differs from the pattern, or -1. */
static long check_pattern(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return (long)i;
	return -1;
}

/* ---- the TCP side channel: length-prefixed blobs ---- */

static void xfer_all(int fd, void *buf, size_t len, int out)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);

		if (n <= 0)
			die("side-channel", n ? strerror(errno) : "peer closed");
		p += n;
		len -= (size_t)n;
	}
}

static void send_blob(int fd, const void *buf, uint64_t len)
{
	xfer_all(fd, &len, sizeof(len), 1);
	xfer_all(fd, (void *)buf, len, 1);
}

static void *recv_blob(int fd, uint64_t *len)
{
	void *buf;

	xfer_all(fd, len, sizeof(*len), 0);
	if (*len > (1u << 20))
		die("side-channel", "blob too large");
	buf = malloc(*len ? *len : 1);
	if (!buf)
		die("side-channel", "out of memory");
	xfer_all(fd, buf, *len, 0);
	return buf;
}

static ucp_worker_h worker;

/*
 * Meets the peer: one byte each way.  The worker progresses meanwhile:
 * over a transport without one-sided operations (ud_verbs) UCP emulates
 * put, get and the atomics with active messages that the target's worker
 * must handle.
 */
static void sync_peer(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint8_t b = 1;
	time_t t0 = time(NULL);

	xfer_all(fd, &b, 1, 1);
	while (poll(&pfd, 1, 0) == 0) {
		ucp_worker_progress(worker);
		if (time(NULL) - t0 > 120)
			die("side-channel", "the peer did not come to a sync point");
	}
	xfer_all(fd, &b, 1, 0);
}

static int side_channel(const char *server, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, one = 1;

	if (!server) {
		int ls = socket(AF_INET, SOCK_STREAM, 0);

		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
			die("side-channel", strerror(errno));
		fd = accept(ls, NULL, NULL);
		close(ls);
		if (fd < 0)
			die("side-channel", strerror(errno));
		return fd;
	}
	if (inet_pton(AF_INET, server, &sa.sin_addr) != 1)
		die("side-channel", "bad server address");
	for (int i = 0; i < 120; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		close(fd);
		sleep(1);
	}
	die("side-channel", "cannot connect");
	return -1;
}

/* ---- UCP ---- */

static ucp_context_h context;
static ucp_ep_h ep;

/* Waits for a request (or an immediate status) to finish, 60 s at most. */
static ucs_status_t wait_req(void *req)
{
	struct timespec t0, t;
	ucs_status_t st;

	if (req == NULL)
		return UCS_OK;
	if (UCS_PTR_IS_ERR(req))
		return UCS_PTR_STATUS(req);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
		ucp_worker_progress(worker);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 60) {
			ucp_request_cancel(worker, req);
			while (ucp_request_check_status(req) == UCS_INPROGRESS)
				ucp_worker_progress(worker);
			ucp_request_free(req);
			return UCS_ERR_TIMED_OUT;
		}
	}
	ucp_request_free(req);
	return st;
}

static ucs_status_t tag_send(const void *buf, size_t len, ucp_tag_t tag)
{
	ucp_request_param_t p = { 0 };

	return wait_req(ucp_tag_send_nbx(ep, buf, len, tag, &p));
}

static void tag_recv_done(void *req, ucs_status_t st, const ucp_tag_recv_info_t *info, void *got)
{
	(void)req;
	(void)st;
	*(size_t *)got = info->length;
}

static ucs_status_t tag_recv(void *buf, size_t len, ucp_tag_t tag, size_t *got)
{
	ucp_tag_recv_info_t info = { 0 };
	/*
	 * The receive info is filled in place only when the receive completes
	 * at once; otherwise the callback gets it.
	 */
	ucp_request_param_t p = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FIELD_CALLBACK |
				UCP_OP_ATTR_FIELD_USER_DATA,
		.recv_info.tag_info = &info,
		.cb.recv = tag_recv_done,
		.user_data = got,
	};
	void *req;

	*got = (size_t)-1;
	req = ucp_tag_recv_nbx(worker, buf, len, tag, ~0ull, &p);
	if (req == NULL)
		*got = info.length;
	return wait_req(req);
}

static ucs_status_t flush_ep(void)
{
	ucp_request_param_t p = { 0 };

	return wait_req(ucp_ep_flush_nbx(ep, &p));
}

static ucs_status_t amo(ucp_atomic_op_t op, uint64_t value, uint64_t *reply, uint64_t raddr,
			ucp_rkey_h rkey)
{
	ucp_request_param_t p = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
		.datatype = ucp_dt_make_contig(8),
	};

	if (reply) {
		p.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
		p.reply_buffer = reply;
	}
	return wait_req(ucp_atomic_op_nbx(ep, op, &value, 1, raddr, rkey, &p));
}

static const size_t tag_sizes[] = { 1, 63, 4096, 65536, 1u << 20, 4u << 20 };

/* The put ranges: (offset, length) inside the region. */
static const size_t put_ranges[][2] = {
	{ 0, 1 }, { 4095, 2 }, { 8192, 4096 }, { 65536 + 7, 100000 }, { 1u << 20, 3u << 20 },
};

static void init_ucp(void)
{
	ucp_params_t params = {
		.field_mask = UCP_PARAM_FIELD_FEATURES,
		.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO64,
	};
	ucp_worker_params_t wp = {
		.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
		.thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	ucp_config_t *config;

	if (ucp_config_read(NULL, NULL, &config) != UCS_OK)
		die("ucp-init", "ucp_config_read");
	if (ucp_init(&params, config, &context) != UCS_OK)
		die("ucp-init", "ucp_init");
	ucp_config_release(config);
	if (ucp_worker_create(context, &wp, &worker) != UCS_OK)
		die("ucp-init", "ucp_worker_create");
}

static void connect_ep(int fd)
{
	ucp_address_t *addr;
	size_t addr_len;
	uint64_t peer_len;
	void *peer;
	ucp_ep_params_t ep_params = {
		.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
	};

	if (ucp_worker_get_address(worker, &addr, &addr_len) != UCS_OK)
		die("ucp-address", "ucp_worker_get_address");
	send_blob(fd, addr, addr_len);
	peer = recv_blob(fd, &peer_len);
	ucp_worker_release_address(worker, addr);
	ep_params.address = peer;
	if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK)
		die("ucp-ep", "ucp_ep_create");
	free(peer);
	/* The lanes UCP chose: the suite checks their transport. */
	ucp_ep_print_info(ep, stdout);
	fflush(stdout);
	result(1, "ucp-connected", "");
}

static void close_ep(void)
{
	ucp_request_param_t p = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
		.flags = UCP_EP_CLOSE_FLAG_FORCE,
	};

	wait_req(ucp_ep_close_nbx(ep, &p));
}

static void server(int fd)
{
	size_t maxlen = 4u << 20, got = 0;
	uint8_t *buf = malloc(maxlen), *region;
	ucp_mem_map_params_t mp = {
		.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS,
		.length = REGION,
		.flags = UCP_MEM_MAP_ALLOCATE,
	};
	ucp_mem_attr_t attr = { .field_mask = UCP_MEM_ATTR_FIELD_ADDRESS };
	ucp_mem_h memh;
	void *rkey_buf;
	size_t rkey_len;
	uint64_t raddr, word;
	char name[32];

	for (size_t i = 0; i < sizeof(tag_sizes) / sizeof(tag_sizes[0]); i++) {
		size_t n = tag_sizes[i];
		ucs_status_t st;
		long bad;

		snprintf(name, sizeof(name), "tag-%zu", n);
		memset(buf, 0, maxlen);
		st = tag_recv(buf, maxlen, n, &got);
		bad = check_pattern(buf, n, (uint32_t)n);
		result(st == UCS_OK && got == n && bad < 0, name, "status %s, %zu bytes, first bad byte %ld",
		       ucs_status_string(st), got, bad);
		fill(buf, n, (uint32_t)n + 1);
		st = tag_send(buf, n, n + 1);
		if (st != UCS_OK)
			result(0, name, "answer: %s", ucs_status_string(st));
	}

	/* The region for put, get and the atomics. */
	if (ucp_mem_map(context, &mp, &memh) != UCS_OK)
		die("mem-map", "ucp_mem_map");
	if (ucp_mem_query(memh, &attr) != UCS_OK)
		die("mem-map", "ucp_mem_query");
	region = attr.address;
	memset(region, 0, REGION);
	if (ucp_rkey_pack(context, memh, &rkey_buf, &rkey_len) != UCS_OK)
		die("mem-map", "ucp_rkey_pack");
	raddr = (uint64_t)(uintptr_t)region;
	send_blob(fd, &raddr, sizeof(raddr));
	send_blob(fd, rkey_buf, rkey_len);
	ucp_rkey_buffer_release(rkey_buf);

	/* put: the client writes, flushes, then syncs. */
	sync_peer(fd);
	{
		uint8_t *want = calloc(1, REGION);
		long bad = -1;

		for (size_t i = 0; i < sizeof(put_ranges) / sizeof(put_ranges[0]); i++)
			fill(want + put_ranges[i][0], put_ranges[i][1], 100 + (uint32_t)i);
		for (size_t i = 0; i < REGION; i++)
			if (region[i] != want[i]) {
				bad = (long)i;
				break;
			}
		result(bad < 0, "put", "region differs first at byte %ld", bad);
		free(want);
	}

	/* get: the region holds a pattern the client reads. */
	fill(region, REGION, 7);
	sync_peer(fd);
	sync_peer(fd);

	/* The atomics' word. */
	memcpy(region + AMO_OFF, &(uint64_t){ AMO_START }, 8);
	sync_peer(fd);
	sync_peer(fd);
	memcpy(&word, region + AMO_OFF, 8);
	/* 100 fetch-adds of 1, a matching compare-swap to 5, a failed one, a swap to 9. */
	result(word == 9 && check_pattern(region, AMO_OFF, 7) < 0, "amo-final-word",
	       "word %#" PRIx64 " (want 0x9), or the region around it changed", word);

	sync_peer(fd);
	close_ep();
	ucp_mem_unmap(context, memh);
	free(buf);
}

static void client(int fd)
{
	size_t maxlen = 4u << 20, got = 0;
	uint8_t *buf = malloc(maxlen), *local;
	uint64_t raddr, len, fetched, want;
	void *packed, *addr_blob;
	ucp_rkey_h rkey;
	ucs_status_t st;
	char name[32];
	int ok;

	for (size_t i = 0; i < sizeof(tag_sizes) / sizeof(tag_sizes[0]); i++) {
		size_t n = tag_sizes[i];
		long bad;

		snprintf(name, sizeof(name), "tag-%zu", n);
		fill(buf, n, (uint32_t)n);
		st = tag_send(buf, n, n);
		memset(buf, 0, maxlen);
		if (st == UCS_OK)
			st = tag_recv(buf, maxlen, n + 1, &got);
		bad = check_pattern(buf, n, (uint32_t)n + 1);
		result(st == UCS_OK && got == n && bad < 0, name, "status %s, %zu bytes back, first bad byte %ld",
		       ucs_status_string(st), got, bad);
	}

	addr_blob = recv_blob(fd, &len);
	memcpy(&raddr, addr_blob, sizeof(raddr));
	free(addr_blob);
	packed = recv_blob(fd, &len);
	if (ucp_ep_rkey_unpack(ep, packed, &rkey) != UCS_OK)
		die("rkey", "ucp_ep_rkey_unpack");
	free(packed);

	local = malloc(REGION);
	ok = 1;
	for (size_t i = 0; i < sizeof(put_ranges) / sizeof(put_ranges[0]); i++) {
		ucp_request_param_t p = { 0 };
		uint8_t *src = local + put_ranges[i][0];

		fill(src, put_ranges[i][1], 100 + (uint32_t)i);
		st = wait_req(ucp_put_nbx(ep, src, put_ranges[i][1], raddr + put_ranges[i][0], rkey, &p));
		if (st != UCS_OK) {
			result(0, "put-posted", "range %zu: %s", i, ucs_status_string(st));
			ok = 0;
		}
	}
	st = flush_ep();
	result(ok && st == UCS_OK, "put-flushed", "flush: %s", ucs_status_string(st));
	sync_peer(fd);

	sync_peer(fd);
	ok = 1;
	for (size_t i = 0; i < sizeof(put_ranges) / sizeof(put_ranges[0]); i++) {
		ucp_request_param_t p = { 0 };
		size_t off = put_ranges[i][0], n = put_ranges[i][1];
		long bad = -1;

		memset(local, 0, n);
		st = wait_req(ucp_get_nbx(ep, local, n, raddr + off, rkey, &p));
		for (size_t j = 0; st == UCS_OK && j < n; j++)
			if (local[j] != pattern_byte(7, off + j)) {
				bad = (long)j;
				break;
			}
		if (st != UCS_OK || bad >= 0) {
			result(0, "get", "range %zu: %s, first bad byte %ld", i, ucs_status_string(st), bad);
			ok = 0;
		}
	}
	if (ok)
		result(1, "get", "");
	sync_peer(fd);

	sync_peer(fd);
	ok = 1;
	for (uint64_t i = 0; i < FETCH_ADDS && ok; i++) {
		fetched = 0;
		st = amo(UCP_ATOMIC_OP_ADD, 1, &fetched, raddr + AMO_OFF, rkey);
		ok = st == UCS_OK && fetched == AMO_START + i;
		if (!ok)
			result(0, "amo-fetch-add", "add %" PRIu64 ": %s, got %#" PRIx64, i,
			       ucs_status_string(st), fetched);
	}
	if (ok)
		result(1, "amo-fetch-add", "");
	want = AMO_START + FETCH_ADDS;
	/* Compare-swap: the reply buffer holds the swap value in, the old value out. */
	fetched = 5;
	st = amo(UCP_ATOMIC_OP_CSWAP, want, &fetched, raddr + AMO_OFF, rkey);
	result(st == UCS_OK && fetched == want, "amo-cswap-hit", "%s, old %#" PRIx64,
	       ucs_status_string(st), fetched);
	fetched = 6;
	st = amo(UCP_ATOMIC_OP_CSWAP, want, &fetched, raddr + AMO_OFF, rkey);
	result(st == UCS_OK && fetched == 5, "amo-cswap-miss", "%s, old %#" PRIx64,
	       ucs_status_string(st), fetched);
	fetched = 0;
	st = amo(UCP_ATOMIC_OP_SWAP, 9, &fetched, raddr + AMO_OFF, rkey);
	result(st == UCS_OK && fetched == 5, "amo-swap", "%s, old %#" PRIx64, ucs_status_string(st),
	       fetched);
	st = flush_ep();
	result(st == UCS_OK, "amo-flushed", "%s", ucs_status_string(st));
	sync_peer(fd);

	sync_peer(fd);
	ucp_rkey_destroy(rkey);
	close_ep();
	free(local);
	free(buf);
}

int main(int argc, char **argv)
{
	int fd;

	if (argc == 3 && !strcmp(argv[1], "server")) {
		role = "server";
		init_ucp();
		fd = side_channel(NULL, atoi(argv[2]));
		connect_ep(fd);
		server(fd);
	} else if (argc == 4 && !strcmp(argv[1], "client")) {
		role = "client";
		init_ucp();
		fd = side_channel(argv[2], atoi(argv[3]));
		connect_ep(fd);
		client(fd);
	} else {
		fprintf(stderr, "usage: ucp-check server PORT | client SERVER_IP PORT\n");
		return 2;
	}
	close(fd);
	ucp_worker_destroy(worker);
	ucp_cleanup(context);
	return failures > 100 ? 100 : failures;
}
