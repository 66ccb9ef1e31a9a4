// SPDX-License-Identifier: GPL-2.0
/*
 * rrxe_ktest: kernel verbs that no user verb reaches, run against the RDMA
 * device of a netdev (either driver) when the module is loaded. Loading
 * fails with the first error; each step is logged as "rrxe_ktest: ...".
 *
 * modify_ah (rdma_modify_ah; in 7.2 only hfi1 calls it, under RCU): a
 * kernel UD QP creates an address handle toward a host that does not
 * exist (old=), modifies it toward the peer (peer=) and sends a datagram
 * through it to the peer's UD QP (qpn=, qkey=), which checks what it got.
 * Then the handle is modified twice with interrupts off (toward old=, and
 * back), where a driver can look no route up, and a second datagram goes
 * through it. Before all that, a modify the core itself refuses (port 2:
 * -EINVAL) must leave the handle as it was.
 *
 *   modprobe rrxe_ktest netdev=eth0 src=10.0.0.1 old=10.0.0.99 \
 *            peer=10.0.0.2 qpn=N qkey=0x11111111 msg=TEXT
 */

#include <linux/delay.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *netdev = "eth0";
static char *src = "";
static char *old = "10.0.0.99";
static char *peer = "";
static uint qpn;
static uint qkey = 0x11111111;
static char *msg = "rrxe_ktest modify_ah";
module_param(netdev, charp, 0444);
module_param(src, charp, 0444);
module_param(old, charp, 0444);
module_param(peer, charp, 0444);
module_param(qpn, uint, 0444);
module_param(qkey, uint, 0444);
module_param(msg, charp, 0444);

/* The IPv4-mapped GID of a dotted address (RoCEv2). */
static int ipv4_gid(const char *s, union ib_gid *gid)
{
	__be32 a;

	if (!in4_pton(s, -1, (u8 *)&a, -1, NULL))
		return -EINVAL;
	ipv6_addr_set_v4mapped(a, (struct in6_addr *)gid->raw);
	return 0;
}

/* Whether the handle's destination GID is @want, as rdma_query_ah says. */
static int ah_dgid_is(struct ib_ah *ah, const union ib_gid *want, const char *what)
{
	struct rdma_ah_attr q = {};
	int err = rdma_query_ah(ah, &q);

	if (err) {
		pr_err("rrxe_ktest: %s: rdma_query_ah: %d\n", what, err);
		return err;
	}
	if (memcmp(rdma_ah_read_grh(&q)->dgid.raw, want->raw, 16)) {
		pr_err("rrxe_ktest: %s: dgid %pI6, want %pI6\n", what,
		       rdma_ah_read_grh(&q)->dgid.raw, want->raw);
		return -EIO;
	}
	pr_info("rrxe_ktest: %s: dgid %pI6\n", what, want->raw);
	return 0;
}

static int modify_qp(struct ib_qp *qp, enum ib_qp_state state)
{
	struct ib_qp_attr a = { .qp_state = state };
	int mask = IB_QP_STATE;

	if (state == IB_QPS_INIT) {
		a.port_num = 1;
		a.qkey = qkey;
		mask |= IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY;
	} else if (state == IB_QPS_RTS) {
		mask |= IB_QP_SQ_PSN;
	}
	return ib_modify_qp(qp, &a, mask);
}

/* One signalled SEND of @len bytes at @dma through @ah; waits for it. */
static int send_datagram(struct ib_pd *pd, struct ib_qp *qp, struct ib_cq *cq,
			 struct ib_ah *ah, u64 dma, u32 len)
{
	struct ib_sge sge = { .addr = dma, .length = len, .lkey = pd->local_dma_lkey };
	struct ib_ud_wr wr = {
		.wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
			.opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED },
		.ah = ah, .remote_qpn = qpn, .remote_qkey = qkey,
	};
	struct ib_wc wc;
	int err, i;

	err = ib_post_send(qp, &wr.wr, NULL);
	if (err)
		return err;
	for (i = 0; i < 500; i++) {
		if (ib_poll_cq(cq, 1, &wc) == 1) {
			pr_info("rrxe_ktest: send completed: status %d\n", wc.status);
			return wc.status == IB_WC_SUCCESS ? 0 : -EIO;
		}
		msleep(10);
	}
	pr_err("rrxe_ktest: no send completion in 5 s\n");
	return -ETIMEDOUT;
}

static int test_modify_ah(struct ib_device *ibdev, struct net_device *ndev)
{
	struct ib_qp_init_attr qpi = {
		.qp_type = IB_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_type = IB_SIGNAL_REQ_WR,
	};
	struct rdma_ah_attr attr = {}, bad;
	const struct ib_gid_attr *sgid;
	union ib_gid sgid_raw, old_gid, peer_gid;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_ah *ah;
	size_t len = strlen(msg);
	unsigned long flags;
	void *buf;
	u64 dma;
	int err;

	if (ipv4_gid(src, &sgid_raw) || ipv4_gid(old, &old_gid) ||
	    ipv4_gid(peer, &peer_gid) || !qpn)
		return -EINVAL;
	sgid = rdma_find_gid(ibdev, &sgid_raw, IB_GID_TYPE_ROCE_UDP_ENCAP, ndev);
	if (IS_ERR(sgid)) {
		pr_err("rrxe_ktest: no RoCEv2 GID for %s\n", src);
		return PTR_ERR(sgid);
	}
	buf = kmemdup(msg, len, GFP_KERNEL);
	if (!buf) {
		err = -ENOMEM;
		goto put_gid;
	}
	dma = ib_dma_map_single(ibdev, buf, len, DMA_TO_DEVICE);
	if (ib_dma_mapping_error(ibdev, dma)) {
		err = -ENOMEM;
		goto free_buf;
	}
	pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(pd)) {
		err = PTR_ERR(pd);
		goto unmap;
	}
	cq = ib_alloc_cq(ibdev, NULL, 8, 0, IB_POLL_DIRECT);
	if (IS_ERR(cq)) {
		err = PTR_ERR(cq);
		goto free_pd;
	}
	attr.type = rdma_ah_find_type(ibdev, 1);
	rdma_ah_set_port_num(&attr, 1);
	rdma_ah_set_grh(&attr, &old_gid, 0, sgid->index, 64, 0);
	ah = rdma_create_ah(pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(ah)) {
		err = PTR_ERR(ah);
		pr_err("rrxe_ktest: rdma_create_ah: %d\n", err);
		goto free_cq;
	}
	/* Destroyed before the handle and the buffer: a send that timed out
	 * may still be queued until then.
	 */
	qpi.send_cq = cq;
	qpi.recv_cq = cq;
	qp = ib_create_qp(pd, &qpi);
	if (IS_ERR(qp)) {
		err = PTR_ERR(qp);
		goto destroy_ah;
	}
	err = modify_qp(qp, IB_QPS_INIT) ?: modify_qp(qp, IB_QPS_RTR) ?:
	      modify_qp(qp, IB_QPS_RTS);
	if (err)
		goto destroy_qp;

	err = ah_dgid_is(ah, &old_gid, "created");
	if (err)
		goto destroy_qp;

	/* Port 2 does not exist: the core refuses it (rdma_check_ah_attr)
	 * before the driver is called, and nothing changes.
	 */
	bad = attr;
	rdma_ah_set_grh(&bad, &peer_gid, 0, sgid->index, 64, 0);
	rdma_ah_set_port_num(&bad, 2);
	err = rdma_modify_ah(ah, &bad);
	pr_info("rrxe_ktest: modify to port 2: %d\n", err);
	if (err != -EINVAL) {
		err = -EIO;
		goto destroy_qp;
	}
	err = ah_dgid_is(ah, &old_gid, "after refused modify");
	if (err)
		goto destroy_qp;

	rdma_ah_set_grh(&attr, &peer_gid, 0, sgid->index, 64, 0);
	err = rdma_modify_ah(ah, &attr);
	pr_info("rrxe_ktest: modify to %s: %d\n", peer, err);
	if (err)
		goto destroy_qp;
	err = ah_dgid_is(ah, &peer_gid, "modified");
	if (err)
		goto destroy_qp;
	err = send_datagram(pd, qp, cq, ah, dma, len);
	if (err)
		goto destroy_qp;

	/* As hfi1 calls it: in atomic context, where no route can be looked
	 * up; the datagram must still reach the peer.
	 */
	local_irq_save(flags);
	rdma_ah_set_grh(&attr, &old_gid, 0, sgid->index, 64, 0);
	err = rdma_modify_ah(ah, &attr);
	if (!err) {
		rdma_ah_set_grh(&attr, &peer_gid, 0, sgid->index, 64, 0);
		err = rdma_modify_ah(ah, &attr);
	}
	local_irq_restore(flags);
	pr_info("rrxe_ktest: modify to %s and back, interrupts off: %d\n", old, err);
	if (err)
		goto destroy_qp;
	err = ah_dgid_is(ah, &peer_gid, "modified with interrupts off");
	if (err)
		goto destroy_qp;
	err = send_datagram(pd, qp, cq, ah, dma, len);
destroy_qp:
	ib_destroy_qp(qp);
destroy_ah:
	rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
free_cq:
	ib_free_cq(cq);
free_pd:
	ib_dealloc_pd(pd);
unmap:
	ib_dma_unmap_single(ibdev, dma, len, DMA_TO_DEVICE);
free_buf:
	kfree(buf);
put_gid:
	rdma_put_gid_attr(sgid);
	return err;
}

static int __init rrxe_ktest_init(void)
{
	struct net_device *ndev;
	struct ib_device *ibdev;
	int err;

	ndev = dev_get_by_name(&init_net, netdev);
	if (!ndev)
		return -ENODEV;
	ibdev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	if (!ibdev) {
		dev_put(ndev);
		return -ENODEV;
	}
	pr_info("rrxe_ktest: device %s\n", dev_name(&ibdev->dev));
	err = test_modify_ah(ibdev, ndev);
	pr_info("rrxe_ktest: modify_ah: %d\n", err);
	ib_device_put(ibdev);
	dev_put(ndev);
	return err;
}

static void __exit rrxe_ktest_exit(void)
{
}

module_init(rrxe_ktest_init);
module_exit(rrxe_ktest_exit);
MODULE_DESCRIPTION("rrxe: tests of kernel verbs no user verb reaches");
MODULE_LICENSE("GPL");
