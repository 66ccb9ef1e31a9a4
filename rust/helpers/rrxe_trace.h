/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rrxe tracepoints (system "rrxe"): QP state changes, packets handed to the
 * IP stack and received, retransmissions, NAKs and RNR NAKs, and error
 * completions.  rdma_rxe has none; these are for `perf trace -e 'rrxe:*'`,
 * `trace-cmd record -e rrxe` or tracefs directly.
 *
 * The Rust side calls them through the `rrxe_helper_trace_*` functions of
 * rrxe_helpers.c (kernel::tracepoint::declare_trace! only reaches
 * tracepoints the kernel crate's bindings know); rrxe_trace.c creates them.
 * Enumerations are printed with __print_symbolic over TRACE_DEFINE_ENUM'd
 * names, so that user-space tools can decode them from the format files.
 */

#undef TRACE_SYSTEM
#define TRACE_SYSTEM rrxe

#if !defined(_RRXE_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _RRXE_TRACE_H

#include <linux/tracepoint.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_pack.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <trace/misc/rdma.h>

#ifndef _RRXE_TRACE_TYPES
#define _RRXE_TRACE_TYPES
/* Why the requester sends packets again (`rrxe_retransmit`). */
enum rrxe_retransmit_reason {
	/* The local ACK timeout expired (IBTA Vol 1 §9.7.6.1.3). */
	RRXE_RETRANSMIT_TIMEOUT,
	/* A PSN sequence error NAK arrived (§9.7.5.2.2). */
	RRXE_RETRANSMIT_SEQ_NAK,
	/* The wait an RNR NAK asked for is over (§9.7.5.2.8). */
	RRXE_RETRANSMIT_RNR,
	/* An ACK covered a READ or atomic whose response is missing: an
	 * implied NAK (§9.7.5.1.1). */
	RRXE_RETRANSMIT_IMPLIED_NAK,
};
#endif

#define RRXE_QP_STATE_LIST		\
	rrxe_qps(RESET)			\
	rrxe_qps(INIT)			\
	rrxe_qps(RTR)			\
	rrxe_qps(RTS)			\
	rrxe_qps(SQD)			\
	rrxe_qps(SQE)			\
	rrxe_qps_end(ERR)

#define RRXE_OPCODE_LIST				\
	rrxe_op(RC_SEND_FIRST)				\
	rrxe_op(RC_SEND_MIDDLE)				\
	rrxe_op(RC_SEND_LAST)				\
	rrxe_op(RC_SEND_LAST_WITH_IMMEDIATE)		\
	rrxe_op(RC_SEND_ONLY)				\
	rrxe_op(RC_SEND_ONLY_WITH_IMMEDIATE)		\
	rrxe_op(RC_RDMA_WRITE_FIRST)			\
	rrxe_op(RC_RDMA_WRITE_MIDDLE)			\
	rrxe_op(RC_RDMA_WRITE_LAST)			\
	rrxe_op(RC_RDMA_WRITE_LAST_WITH_IMMEDIATE)	\
	rrxe_op(RC_RDMA_WRITE_ONLY)			\
	rrxe_op(RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE)	\
	rrxe_op(RC_RDMA_READ_REQUEST)			\
	rrxe_op(RC_RDMA_READ_RESPONSE_FIRST)		\
	rrxe_op(RC_RDMA_READ_RESPONSE_MIDDLE)		\
	rrxe_op(RC_RDMA_READ_RESPONSE_LAST)		\
	rrxe_op(RC_RDMA_READ_RESPONSE_ONLY)		\
	rrxe_op(RC_ACKNOWLEDGE)				\
	rrxe_op(RC_ATOMIC_ACKNOWLEDGE)			\
	rrxe_op(RC_COMPARE_SWAP)			\
	rrxe_op(RC_FETCH_ADD)				\
	rrxe_op(RC_SEND_LAST_WITH_INVALIDATE)		\
	rrxe_op(RC_SEND_ONLY_WITH_INVALIDATE)		\
	rrxe_op(RC_FLUSH)				\
	rrxe_op(RC_ATOMIC_WRITE)			\
	rrxe_op(UC_SEND_FIRST)				\
	rrxe_op(UC_SEND_MIDDLE)				\
	rrxe_op(UC_SEND_LAST)				\
	rrxe_op(UC_SEND_LAST_WITH_IMMEDIATE)		\
	rrxe_op(UC_SEND_ONLY)				\
	rrxe_op(UC_SEND_ONLY_WITH_IMMEDIATE)		\
	rrxe_op(UC_RDMA_WRITE_FIRST)			\
	rrxe_op(UC_RDMA_WRITE_MIDDLE)			\
	rrxe_op(UC_RDMA_WRITE_LAST)			\
	rrxe_op(UC_RDMA_WRITE_LAST_WITH_IMMEDIATE)	\
	rrxe_op(UC_RDMA_WRITE_ONLY)			\
	rrxe_op(UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE)	\
	rrxe_op(UD_SEND_ONLY)				\
	rrxe_op_end(UD_SEND_ONLY_WITH_IMMEDIATE)

#define RRXE_RETRANSMIT_LIST		\
	rrxe_rt(TIMEOUT)		\
	rrxe_rt(SEQ_NAK)		\
	rrxe_rt(RNR)			\
	rrxe_rt_end(IMPLIED_NAK)

/*
 * The list items name their enumerator through rrxe_em()/rrxe_em_end(),
 * which are defined twice: first to export the values, then as the
 * __print_symbolic() table entries.
 */
#undef rrxe_qps
#undef rrxe_qps_end
#undef rrxe_op
#undef rrxe_op_end
#undef rrxe_rt
#undef rrxe_rt_end
#define rrxe_qps(x)	rrxe_em(IB_QPS_##x, #x)
#define rrxe_qps_end(x)	rrxe_em_end(IB_QPS_##x, #x)
#define rrxe_op(x)	rrxe_em(IB_OPCODE_##x, #x)
#define rrxe_op_end(x)	rrxe_em_end(IB_OPCODE_##x, #x)
#define rrxe_rt(x)	rrxe_em(RRXE_RETRANSMIT_##x, #x)
#define rrxe_rt_end(x)	rrxe_em_end(RRXE_RETRANSMIT_##x, #x)

#undef rrxe_em
#undef rrxe_em_end
#define rrxe_em(a, b)		TRACE_DEFINE_ENUM(a);
#define rrxe_em_end(a, b)	TRACE_DEFINE_ENUM(a);

RRXE_QP_STATE_LIST
RRXE_OPCODE_LIST
RRXE_RETRANSMIT_LIST

#undef rrxe_em
#undef rrxe_em_end
#define rrxe_em(a, b)		{ a, b },
#define rrxe_em_end(a, b)	{ a, b }

#define rrxe_show_qp_state(x)	__print_symbolic(x, RRXE_QP_STATE_LIST)
#define rrxe_show_opcode(x)	__print_symbolic(x, RRXE_OPCODE_LIST)
#define rrxe_show_retransmit(x)	__print_symbolic(x, RRXE_RETRANSMIT_LIST)

/* The AETH syndrome's top three bits (IBTA Vol 1 §9.7.5.2.1, table 45). */
#define rrxe_show_nak_kind(s) \
	__print_symbolic((s) >> 5, { 1, "RNR_NAK" }, { 3, "NAK" })

TRACE_EVENT(rrxe_qp_state,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u32 old_state,
		 u32 new_state),
	TP_ARGS(ibdev, qpn, old_state, new_state),
	TP_STRUCT__entry(
		__string(dev, dev_name(&ibdev->dev))
		__field(u32, qpn)
		__field(u32, old_state)
		__field(u32, new_state)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->old_state = old_state;
		__entry->new_state = new_state;
	),
	TP_printk("%s qpn=%#x %s -> %s", __get_str(dev), __entry->qpn,
		  rrxe_show_qp_state(__entry->old_state),
		  rrxe_show_qp_state(__entry->new_state))
);

/*
 * One packet: on send, `qpn` is the sending QP and `dest_qpn` the BTH's;
 * on receive both are the BTH's destination QP.  `len` is the payload.
 */
DECLARE_EVENT_CLASS(rrxe_pkt,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u32 dest_qpn, u32 psn,
		 u8 opcode, u32 len, bool ackreq),
	TP_ARGS(ibdev, qpn, dest_qpn, psn, opcode, len, ackreq),
	TP_STRUCT__entry(
		__string(dev, dev_name(&ibdev->dev))
		__field(u32, qpn)
		__field(u32, dest_qpn)
		__field(u32, psn)
		__field(u32, len)
		__field(u8, opcode)
		__field(bool, ackreq)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->dest_qpn = dest_qpn;
		__entry->psn = psn;
		__entry->len = len;
		__entry->opcode = opcode;
		__entry->ackreq = ackreq;
	),
	TP_printk("%s qpn=%#x dest_qpn=%#x psn=%#x %s len=%u ackreq=%d",
		  __get_str(dev), __entry->qpn, __entry->dest_qpn, __entry->psn,
		  rrxe_show_opcode(__entry->opcode), __entry->len,
		  __entry->ackreq)
);

DEFINE_EVENT(rrxe_pkt, rrxe_send_pkt,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u32 dest_qpn, u32 psn,
		 u8 opcode, u32 len, bool ackreq),
	TP_ARGS(ibdev, qpn, dest_qpn, psn, opcode, len, ackreq));

DEFINE_EVENT(rrxe_pkt, rrxe_recv_pkt,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u32 dest_qpn, u32 psn,
		 u8 opcode, u32 len, bool ackreq),
	TP_ARGS(ibdev, qpn, dest_qpn, psn, opcode, len, ackreq));

TRACE_EVENT(rrxe_retransmit,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u32 psn, u32 reason),
	TP_ARGS(ibdev, qpn, psn, reason),
	TP_STRUCT__entry(
		__string(dev, dev_name(&ibdev->dev))
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, reason)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->psn = psn;
		__entry->reason = reason;
	),
	TP_printk("%s qpn=%#x from psn=%#x %s", __get_str(dev), __entry->qpn,
		  __entry->psn, rrxe_show_retransmit(__entry->reason))
);

/*
 * A NAK or RNR NAK, sent by the responder or received by the requester;
 * `code` is the syndrome's low five bits: the NAK code, or the RNR NAK's
 * timer field.
 */
TRACE_EVENT(rrxe_nak,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u32 psn, u8 syndrome,
		 bool sent),
	TP_ARGS(ibdev, qpn, psn, syndrome, sent),
	TP_STRUCT__entry(
		__string(dev, dev_name(&ibdev->dev))
		__field(u32, qpn)
		__field(u32, psn)
		__field(u8, syndrome)
		__field(bool, sent)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->psn = psn;
		__entry->syndrome = syndrome;
		__entry->sent = sent;
	),
	TP_printk("%s qpn=%#x psn=%#x %s %s code=%u", __get_str(dev),
		  __entry->qpn, __entry->psn,
		  __entry->sent ? "sent" : "received",
		  rrxe_show_nak_kind(__entry->syndrome),
		  __entry->syndrome & 0x1f)
);

TRACE_EVENT(rrxe_wc_error,
	TP_PROTO(const struct ib_device *ibdev, u32 qpn, u64 wr_id, u32 status,
		 u32 opcode),
	TP_ARGS(ibdev, qpn, wr_id, status, opcode),
	TP_STRUCT__entry(
		__string(dev, dev_name(&ibdev->dev))
		__field(u64, wr_id)
		__field(u32, qpn)
		__field(u32, status)
		__field(u32, opcode)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->wr_id = wr_id;
		__entry->qpn = qpn;
		__entry->status = status;
		__entry->opcode = opcode;
	),
	TP_printk("%s qpn=%#x wr_id=%#llx %s opcode=%u", __get_str(dev),
		  __entry->qpn, __entry->wr_id,
		  rdma_show_wc_status(__entry->status), __entry->opcode)
);

#endif /* _RRXE_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE rrxe_trace
#include <trace/define_trace.h>
