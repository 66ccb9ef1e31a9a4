// SPDX-License-Identifier: GPL-2.0

//! Checks that the generated RDMA bindings agree with the C compiler.
//!
//! The bindings are generated from the same headers and flags as the C code,
//! but a mismatch (a config-dependent field, a bindgen limitation) would make
//! every access through them corrupt memory, so the sizes and offsets the
//! abstractions rely on are compared with probes compiled as C.

use kernel::prelude::*;

#[kunit_tests(rrxe_rdma_layout)]
mod tests {
    use crate::bindings;
    use core::mem::offset_of;
    use kernel::prelude::*;

    macro_rules! probe {
        ($f:ident) => {
            // SAFETY: The probes take no arguments and only return constants.
            unsafe { bindings::$f() }
        };
    }

    #[test]
    fn struct_sizes() {
        assert_eq!(size_of::<bindings::ib_device>(), probe!(sizeof_ib_device));
        assert_eq!(
            size_of::<bindings::ib_device_ops>(),
            probe!(sizeof_ib_device_ops)
        );
        assert_eq!(
            size_of::<bindings::ib_device_attr>(),
            probe!(sizeof_ib_device_attr)
        );
        assert_eq!(
            size_of::<bindings::ib_port_attr>(),
            probe!(sizeof_ib_port_attr)
        );
        assert_eq!(
            size_of::<bindings::ib_port_immutable>(),
            probe!(sizeof_ib_port_immutable)
        );
        assert_eq!(
            size_of::<bindings::ib_ucontext>(),
            probe!(sizeof_ib_ucontext)
        );
        assert_eq!(size_of::<bindings::ib_pd>(), probe!(sizeof_ib_pd));
        assert_eq!(size_of::<bindings::ib_udata>(), probe!(sizeof_ib_udata));
        assert_eq!(
            size_of::<bindings::rdma_hw_stats>(),
            probe!(sizeof_rdma_hw_stats)
        );
        assert_eq!(
            size_of::<bindings::rdma_stat_desc>(),
            probe!(sizeof_rdma_stat_desc)
        );
        assert_eq!(
            size_of::<bindings::rdma_link_ops>(),
            probe!(sizeof_rdma_link_ops)
        );
    }

    #[test]
    fn field_offsets() {
        assert_eq!(
            offset_of!(bindings::ib_device, ops),
            probe!(offsetof_ib_device_ops)
        );
        assert_eq!(
            offset_of!(bindings::ib_device, node_guid),
            probe!(offsetof_ib_device_node_guid)
        );
        assert_eq!(
            offset_of!(bindings::ib_device, uverbs_cmd_mask),
            probe!(offsetof_ib_device_uverbs_cmd_mask)
        );
        assert_eq!(
            offset_of!(bindings::ib_device, phys_port_cnt),
            probe!(offsetof_ib_device_phys_port_cnt)
        );
        assert_eq!(
            offset_of!(bindings::ib_device, name_assign_type),
            probe!(offsetof_ib_device_name_assign_type)
        );
        assert_eq!(
            offset_of!(bindings::ib_device_ops, dealloc_driver),
            probe!(offsetof_ib_device_ops_dealloc_driver)
        );
        assert_eq!(
            offset_of!(bindings::ib_device_ops, size_ib_pd),
            probe!(offsetof_ib_device_ops_size_ib_pd)
        );
        assert_eq!(
            offset_of!(bindings::ib_device_ops, size_ib_ucontext),
            probe!(offsetof_ib_device_ops_size_ib_ucontext)
        );
        assert_eq!(
            offset_of!(bindings::ib_ucontext, device),
            probe!(offsetof_ib_ucontext_device)
        );
        assert_eq!(
            offset_of!(bindings::ib_pd, device),
            probe!(offsetof_ib_pd_device)
        );
        assert_eq!(
            offset_of!(bindings::rdma_hw_stats, value),
            probe!(offsetof_rdma_hw_stats_value)
        );
    }

    /// The protocol core decodes user WQEs from raw slot bytes at fixed
    /// offsets (`proto::wqe`); they must be the C compiler's.
    #[test]
    fn user_wqe_layout() {
        use crate::proto::wqe::*;

        macro_rules! same {
            ($($konst:expr => $f:ident),* $(,)?) => {
                $(assert_eq!($konst, probe!($f));)*
            };
        }

        same! {
            SGE_SIZE => sizeof_rxe_sge,
            SEND_WR_SIZE => sizeof_rxe_send_wr,
            SEND_WQE_SIZE => sizeof_rxe_send_wqe,
            RECV_WQE_SIZE => sizeof_rxe_recv_wqe,
            SGE_ADDR_OFFSET => offsetof_rxe_sge_addr,
            SGE_LENGTH_OFFSET => offsetof_rxe_sge_length,
            SGE_LKEY_OFFSET => offsetof_rxe_sge_lkey,
            DMA_LENGTH_OFFSET => offsetof_rxe_dma_info_length,
            DMA_NUM_SGE_OFFSET => offsetof_rxe_dma_info_num_sge,
            DMA_INFO_SIZE => offsetof_rxe_dma_info_sge,
            DMA_INFO_SIZE => offsetof_rxe_dma_info_inline_data,
            DMA_INFO_SIZE => offsetof_rxe_dma_info_atomic_wr,
            SEND_WQE_WR_ID_OFFSET => offsetof_rxe_send_wqe_wr_id,
            SEND_WQE_OPCODE_OFFSET => offsetof_rxe_send_wqe_opcode,
            SEND_WQE_SEND_FLAGS_OFFSET => offsetof_rxe_send_wqe_send_flags,
            SEND_WQE_EX_OFFSET => offsetof_rxe_send_wqe_imm_data,
            SEND_WQE_EX_OFFSET => offsetof_rxe_send_wqe_invalidate_rkey,
            SEND_WQE_WR_UNION_OFFSET => offsetof_rxe_send_wqe_wr_union,
            SEND_WQE_REMOTE_ADDR_OFFSET => offsetof_rxe_send_wqe_rdma_remote_addr,
            SEND_WQE_RDMA_RKEY_OFFSET => offsetof_rxe_send_wqe_rdma_rkey,
            SEND_WQE_REMOTE_ADDR_OFFSET => offsetof_rxe_send_wqe_atomic_remote_addr,
            SEND_WQE_ATOMIC_COMPARE_ADD_OFFSET => offsetof_rxe_send_wqe_atomic_compare_add,
            SEND_WQE_ATOMIC_SWAP_OFFSET => offsetof_rxe_send_wqe_atomic_swap,
            SEND_WQE_ATOMIC_RKEY_OFFSET => offsetof_rxe_send_wqe_atomic_rkey,
            SEND_WQE_UD_REMOTE_QPN_OFFSET => offsetof_rxe_send_wqe_ud_remote_qpn,
            SEND_WQE_UD_REMOTE_QKEY_OFFSET => offsetof_rxe_send_wqe_ud_remote_qkey,
            SEND_WQE_UD_PKEY_INDEX_OFFSET => offsetof_rxe_send_wqe_ud_pkey_index,
            SEND_WQE_UD_AH_NUM_OFFSET => offsetof_rxe_send_wqe_ud_ah_num,
            SEND_WQE_UD_AV_OFFSET => offsetof_rxe_send_wqe_ud_av,
            SEND_WQE_MW_ADDR_OFFSET => offsetof_rxe_send_wqe_mw_addr,
            SEND_WQE_MW_LENGTH_OFFSET => offsetof_rxe_send_wqe_mw_length,
            SEND_WQE_MW_MR_LKEY_OFFSET => offsetof_rxe_send_wqe_mw_mr_lkey,
            SEND_WQE_MW_MW_RKEY_OFFSET => offsetof_rxe_send_wqe_mw_mw_rkey,
            SEND_WQE_MW_RKEY_OFFSET => offsetof_rxe_send_wqe_mw_rkey,
            SEND_WQE_MW_ACCESS_OFFSET => offsetof_rxe_send_wqe_mw_access,
            SEND_WQE_REMOTE_ADDR_OFFSET => offsetof_rxe_send_wqe_flush_remote_addr,
            SEND_WQE_FLUSH_LENGTH_OFFSET => offsetof_rxe_send_wqe_flush_length,
            SEND_WQE_FLUSH_RKEY_OFFSET => offsetof_rxe_send_wqe_flush_rkey,
            SEND_WQE_FLUSH_TYPE_OFFSET => offsetof_rxe_send_wqe_flush_type,
            SEND_WQE_FLUSH_LEVEL_OFFSET => offsetof_rxe_send_wqe_flush_level,
            SEND_WQE_IOVA_OFFSET => offsetof_rxe_send_wqe_iova,
            SEND_WQE_DMA_OFFSET => offsetof_rxe_send_wqe_dma,
            SEND_WQE_SGE_OFFSET => offsetof_rxe_send_wqe_dma_sge,
            RECV_WQE_WR_ID_OFFSET => offsetof_rxe_recv_wqe_wr_id,
            RECV_WQE_DMA_OFFSET => offsetof_rxe_recv_wqe_dma,
            RECV_WQE_SGE_OFFSET => offsetof_rxe_recv_wqe_dma_sge,
        }
    }
}
