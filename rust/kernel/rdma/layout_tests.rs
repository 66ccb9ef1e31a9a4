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
}
