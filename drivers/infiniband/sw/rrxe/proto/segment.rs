// SPDX-License-Identifier: GPL-2.0

//! Segmentation of a message into packets by path MTU (IBTA Vol 1 §9.7),
//! and the BTH pad count.
//!
//! A message of `len` bytes travels as `max(1, ceil(len / path_mtu))`
//! packets: one ONLY packet, or a FIRST, any number of MIDDLE and a LAST
//! packet. Every packet but the last carries exactly `path_mtu` bytes of
//! payload; the last carries the rest. A zero-length message is one ONLY
//! packet with no payload. Each packet takes the next PSN.

#![forbid(unsafe_code)]

use super::opcode::Position;

/// The path MTU of a QP: the maximum payload per packet. The discriminants
/// are the `enum ib_mtu` values of `include/rdma/ib_verbs.h`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathMtu {
    /// 256 bytes.
    #[default]
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl PathMtu {
    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            PathMtu::Mtu256 => 256,
            PathMtu::Mtu512 => 512,
            PathMtu::Mtu1024 => 1024,
            PathMtu::Mtu2048 => 2048,
            PathMtu::Mtu4096 => 4096,
        }
    }

    /// The `enum ib_mtu` value (1 = 256 ... 5 = 4096).
    pub const fn to_ib_mtu(self) -> u32 {
        self as u32
    }

    /// From the `enum ib_mtu` value (1 = 256 ... 5 = 4096).
    pub const fn from_ib_mtu(v: u32) -> Option<Self> {
        match v {
            1 => Some(PathMtu::Mtu256),
            2 => Some(PathMtu::Mtu512),
            3 => Some(PathMtu::Mtu1024),
            4 => Some(PathMtu::Mtu2048),
            5 => Some(PathMtu::Mtu4096),
            _ => None,
        }
    }

    /// The largest path MTU whose packets fit in `bytes` bytes of payload
    /// room, or `None` below 256.
    pub const fn from_bytes_floor(bytes: u32) -> Option<Self> {
        if bytes >= 4096 {
            Some(PathMtu::Mtu4096)
        } else if bytes >= 2048 {
            Some(PathMtu::Mtu2048)
        } else if bytes >= 1024 {
            Some(PathMtu::Mtu1024)
        } else if bytes >= 512 {
            Some(PathMtu::Mtu512)
        } else if bytes >= 256 {
            Some(PathMtu::Mtu256)
        } else {
            None
        }
    }
}

/// BTH PadCnt for a payload of `payload_len` bytes: the number of zero bytes
/// (0-3) that pad it to a multiple of 4.
pub const fn pad_len(payload_len: usize) -> u8 {
    match payload_len % 4 {
        0 => 0,
        1 => 3,
        2 => 2,
        _ => 1,
    }
}

/// Number of packets of a message of `msg_len` bytes at `mtu` (at least 1).
pub const fn packet_count(msg_len: u32, mtu: PathMtu) -> u32 {
    if msg_len == 0 {
        1
    } else {
        msg_len.div_ceil(mtu.bytes())
    }
}

/// One packet of a segmented message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Index of the packet in the message, from 0; its PSN is the message's
    /// first PSN plus `index`.
    pub index: u32,
    /// FIRST, MIDDLE, LAST or ONLY.
    pub position: Position,
    /// Offset of the payload in the message, in bytes.
    pub offset: u32,
    /// Payload length in bytes.
    pub len: u32,
    /// BTH PadCnt for this packet.
    pub pad: u8,
}

/// Packet `index` of a message of `msg_len` bytes at `mtu`, or `None` past
/// the last one. Used to restart a message in the middle, e.g. to
/// retransmit from a NAK's PSN.
pub const fn segment_at(msg_len: u32, mtu: PathMtu, index: u32) -> Option<Segment> {
    let count = packet_count(msg_len, mtu);
    let Some(position) = Position::of(index, count) else {
        return None;
    };
    // `index < count`, so `index * mtu < msg_len` (or both are 0) and the
    // product does not overflow.
    let offset = index * mtu.bytes();
    let rest = msg_len - offset;
    let len = if rest < mtu.bytes() {
        rest
    } else {
        mtu.bytes()
    };
    Some(Segment {
        index,
        position,
        offset,
        len,
        pad: pad_len(len as usize),
    })
}

/// Iterator over the packets of a message, from [`segments`].
#[derive(Clone, Debug)]
pub struct Segments {
    msg_len: u32,
    mtu: PathMtu,
    next: u32,
    count: u32,
}

/// The packets of a message of `msg_len` bytes at `mtu`, in order.
pub const fn segments(msg_len: u32, mtu: PathMtu) -> Segments {
    Segments {
        msg_len,
        mtu,
        next: 0,
        count: packet_count(msg_len, mtu),
    }
}

impl Iterator for Segments {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        let s = segment_at(self.msg_len, self.mtu, self.next)?;
        self.next += 1;
        Some(s)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.count.saturating_sub(self.next)).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Segments {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pads() {
        assert_eq!(
            [0, 1, 2, 3, 4, 5, 1023, 1024].map(pad_len),
            [0, 3, 2, 1, 0, 3, 1, 0]
        );
        assert_eq!(pad_len(usize::MAX), 1);
    }

    #[test]
    fn counts() {
        let m = PathMtu::Mtu1024;
        assert_eq!(
            [0, 1, 1023, 1024, 1025, 4096, 1 << 20].map(|l| packet_count(l, m)),
            [1, 1, 1, 1, 2, 4, 1024]
        );
        assert_eq!(packet_count(u32::MAX, PathMtu::Mtu256), 1 << 24);
        assert_eq!(packet_count(1 << 31, PathMtu::Mtu4096), 1 << 19);
    }

    #[test]
    fn mtu_values() {
        for v in 1..=5 {
            let m = PathMtu::from_ib_mtu(v).unwrap();
            assert_eq!(m.to_ib_mtu(), v);
            assert_eq!(m.bytes(), 128 << v);
            assert_eq!(PathMtu::from_bytes_floor(m.bytes()), Some(m));
            assert_eq!(PathMtu::from_bytes_floor(m.bytes() + 100), Some(m));
        }
        assert_eq!(PathMtu::from_ib_mtu(0), None);
        assert_eq!(PathMtu::from_ib_mtu(6), None);
        assert_eq!(PathMtu::from_bytes_floor(255), None);
        // rxe: a 1500-byte netdev MTU minus 80 bytes of headers gives 1024.
        assert_eq!(PathMtu::from_bytes_floor(1500 - 80), Some(PathMtu::Mtu1024));
    }

    #[test]
    fn small_messages() {
        let v: Vec<_> = segments(0, PathMtu::Mtu256).collect();
        assert_eq!(
            v,
            [Segment {
                index: 0,
                position: Position::Only,
                offset: 0,
                len: 0,
                pad: 0
            }]
        );
        let v: Vec<_> = segments(1025, PathMtu::Mtu1024).collect();
        assert_eq!(
            v,
            [
                Segment {
                    index: 0,
                    position: Position::First,
                    offset: 0,
                    len: 1024,
                    pad: 0
                },
                Segment {
                    index: 1,
                    position: Position::Last,
                    offset: 1024,
                    len: 1,
                    pad: 3
                },
            ]
        );
        let v: Vec<_> = segments(600, PathMtu::Mtu256)
            .map(|s| (s.position, s.len))
            .collect();
        assert_eq!(
            v,
            [
                (Position::First, 256),
                (Position::Middle, 256),
                (Position::Last, 88)
            ]
        );
        assert_eq!(segment_at(600, PathMtu::Mtu256, 3), None);
        assert_eq!(
            segment_at(u32::MAX, PathMtu::Mtu256, (1 << 24) - 1).map(|s| s.len),
            Some(255)
        );
    }

    fn mtu() -> impl Strategy<Value = PathMtu> {
        (1u32..=5).prop_map(|v| PathMtu::from_ib_mtu(v).unwrap())
    }

    proptest! {
        #[test]
        fn segments_tile_the_message(len in 0u32..(1 << 17), mtu in mtu()) {
            let segs: Vec<_> = segments(len, mtu).collect();
            prop_assert_eq!(segs.len(), packet_count(len, mtu) as usize);
            prop_assert_eq!(segments(len, mtu).len(), segs.len());
            let mut offset = 0;
            for (i, s) in segs.iter().enumerate() {
                prop_assert_eq!(s.index as usize, i);
                prop_assert_eq!(s.offset, offset);
                prop_assert_eq!((s.len as usize + usize::from(s.pad)) % 4, 0);
                prop_assert!(s.pad < 4);
                let last = i + 1 == segs.len();
                prop_assert_eq!(s.position.is_first(), i == 0);
                prop_assert_eq!(s.position.is_last(), last);
                if last {
                    prop_assert!(s.len <= mtu.bytes());
                } else {
                    prop_assert_eq!(s.len, mtu.bytes());
                    prop_assert_eq!(s.pad, 0);
                }
                prop_assert_eq!(segment_at(len, mtu, s.index), Some(*s));
                offset += s.len;
            }
            prop_assert_eq!(offset, len);
        }

        #[test]
        fn segment_at_never_panics(len in any::<u32>(), mtu in mtu(), index in any::<u32>()) {
            if let Some(s) = segment_at(len, mtu, index) {
                prop_assert!(u64::from(s.offset) + u64::from(s.len) <= u64::from(len));
                prop_assert!(s.len <= mtu.bytes());
            } else {
                prop_assert!(index >= packet_count(len, mtu));
            }
        }
    }
}
