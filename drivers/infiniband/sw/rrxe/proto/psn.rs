// SPDX-License-Identifier: GPL-2.0

//! 24-bit packet sequence numbers (IBTA Vol 1 §9.7).
//!
//! A PSN is a 24-bit counter that wraps from `0xff_ffff` to 0. Two PSNs are
//! ordered by the signed distance between them modulo 2^24: `b` is after `a`
//! when `b - a (mod 2^24)` lies in `1..2^23`. This is serial-number
//! arithmetic; it is not a total order, so [`Psn`] does not implement
//! `Ord`.

#![forbid(unsafe_code)]

use core::cmp::Ordering;
use core::fmt;

/// A packet sequence number, always below 2^24.
///
/// # Invariants
///
/// The wrapped value is at most [`Psn::MASK`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[must_use]
pub struct Psn(u32);

/// Where a request PSN falls relative to the responder's expected PSN
/// (IBTA Vol 1 §9.7.5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnRegion {
    /// The PSN is the expected one (ePSN).
    Expected,
    /// The PSN is in the 2^23 PSNs before ePSN: a duplicate request, which is
    /// answered again (ACK, or the stored READ/atomic response).
    Duplicate,
    /// The PSN is after ePSN: packets were lost, NAK with a PSN sequence
    /// error.
    Ahead,
}

impl Psn {
    /// Mask of the 24 PSN bits.
    pub const MASK: u32 = 0x00ff_ffff;
    /// Number of distinct PSNs, 2^24.
    pub const MODULUS: u32 = 1 << 24;
    /// Half the PSN space, 2^23: the largest window in which comparisons are
    /// meaningful.
    pub const HALF: u32 = 1 << 23;

    /// Builds a PSN from the low 24 bits of `v`; the upper 8 bits are dropped.
    pub const fn new(v: u32) -> Self {
        // INVARIANT: masked to 24 bits.
        Psn(v & Self::MASK)
    }

    /// Builds a PSN, or returns `None` if `v` does not fit in 24 bits.
    pub const fn try_new(v: u32) -> Option<Self> {
        if v > Self::MASK {
            None
        } else {
            Some(Psn(v))
        }
    }

    /// The PSN as a number in `0..2^24`.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The PSN `n` packets after this one, modulo 2^24.
    pub const fn add(self, n: u32) -> Self {
        Self::new(self.0.wrapping_add(n))
    }

    /// The PSN `n` packets before this one, modulo 2^24.
    pub const fn sub(self, n: u32) -> Self {
        Self::new(self.0.wrapping_sub(n))
    }

    /// The next PSN.
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// Forward distance from `self` to `to` in packets: `to - self` modulo
    /// 2^24, in `0..2^24`.
    pub const fn distance_to(self, to: Psn) -> u32 {
        to.0.wrapping_sub(self.0) & Self::MASK
    }

    /// Signed distance `self - other` in packets, in `-2^23..2^23`.
    ///
    /// Positive when `self` is after `other`. The result is the 24-bit
    /// difference sign-extended, as the C driver's `psn_compare()` does.
    pub const fn diff(self, other: Psn) -> i32 {
        // Shifting the 24-bit difference into the top of a u32 and back as
        // an i32 sign-extends it.
        i32::from_ne_bytes((self.0.wrapping_sub(other.0) << 8).to_ne_bytes()) >> 8
    }

    /// Orders `self` against `other` by serial-number arithmetic.
    ///
    /// Only meaningful when both PSNs lie within 2^23 of each other; PSNs
    /// exactly 2^23 apart compare as `self` before `other`.
    pub const fn serial_cmp(self, other: Psn) -> Ordering {
        let d = self.diff(other);
        if d < 0 {
            Ordering::Less
        } else if d > 0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// Whether `self` is strictly before `other` (serial arithmetic).
    pub const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// Whether `self` is strictly after `other` (serial arithmetic).
    pub const fn after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// Whether `self` lies in the window of `len` PSNs starting at `start`,
    /// that is in `start, start + 1, ..., start + len - 1` modulo 2^24.
    ///
    /// `len` is in packets; an empty window contains nothing, and a window of
    /// 2^24 or more contains every PSN.
    pub const fn in_window(self, start: Psn, len: u32) -> bool {
        start.distance_to(self) < len
    }

    /// Classifies a received request PSN against the expected PSN `epsn`
    /// (IBTA Vol 1 §9.7.5.1): the 2^23 PSNs before `epsn` are duplicates,
    /// the others after it are ahead.
    pub const fn region(self, epsn: Psn) -> PsnRegion {
        let d = self.diff(epsn);
        if d == 0 {
            PsnRegion::Expected
        } else if d < 0 {
            PsnRegion::Duplicate
        } else {
            PsnRegion::Ahead
        }
    }
}

impl From<Psn> for u32 {
    fn from(p: Psn) -> u32 {
        p.0
    }
}

impl TryFrom<u32> for Psn {
    type Error = super::error::Error;

    fn try_from(v: u32) -> Result<Self, Self::Error> {
        Psn::try_new(v).ok_or(super::error::Error::FieldOutOfRange)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps() {
        assert_eq!(Psn::new(Psn::MASK).next(), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1), Psn::new(Psn::MASK));
        assert_eq!(Psn::new(0x1ff_ffff).get(), Psn::MASK);
        assert_eq!(Psn::try_new(1 << 24), None);
        assert_eq!(Psn::new(0xff_fff0).add(0x20).get(), 0x10);
    }

    #[test]
    fn ordering_across_wrap() {
        let a = Psn::new(0xff_fffe);
        let b = Psn::new(1);
        assert!(a.before(b));
        assert!(b.after(a));
        assert_eq!(b.diff(a), 3);
        assert_eq!(a.diff(b), -3);
        assert_eq!(a.distance_to(b), 3);
        assert_eq!(b.distance_to(a), (1 << 24) - 3);
        assert_eq!(a.serial_cmp(a), Ordering::Equal);
    }

    #[test]
    fn half_space_edge() {
        let a = Psn::new(0);
        let b = Psn::new(Psn::HALF);
        assert_eq!(b.diff(a), -(1 << 23));
        assert_eq!(a.diff(b), -(1 << 23));
        assert_eq!(Psn::new(Psn::HALF - 1).diff(a), (1 << 23) - 1);
    }

    #[test]
    fn regions() {
        let e = Psn::new(5);
        assert_eq!(Psn::new(5).region(e), PsnRegion::Expected);
        assert_eq!(Psn::new(4).region(e), PsnRegion::Duplicate);
        assert_eq!(Psn::new(Psn::MASK).region(e), PsnRegion::Duplicate);
        assert_eq!(Psn::new(6).region(e), PsnRegion::Ahead);
    }

    #[test]
    fn windows() {
        let s = Psn::new(0xff_fffe);
        assert!(s.in_window(s, 1));
        assert!(!s.in_window(s, 0));
        assert!(Psn::new(1).in_window(s, 4));
        assert!(!Psn::new(2).in_window(s, 4));
        assert!(Psn::new(12345).in_window(s, Psn::MODULUS));
    }

    fn psn() -> impl Strategy<Value = Psn> {
        (0..Psn::MODULUS).prop_map(Psn::new)
    }

    proptest! {
        #[test]
        fn add_sub_inverse(a in psn(), n in any::<u32>()) {
            prop_assert_eq!(a.add(n).sub(n), a);
            prop_assert!(a.add(n).get() <= Psn::MASK);
        }

        #[test]
        fn add_matches_modular(a in psn(), n in any::<u32>()) {
            let want = (u64::from(a.get()) + u64::from(n)) % u64::from(Psn::MODULUS);
            prop_assert_eq!(u64::from(a.add(n).get()), want);
        }

        #[test]
        fn distance_roundtrip(a in psn(), b in psn()) {
            prop_assert_eq!(a.add(a.distance_to(b)), b);
            prop_assert!(a.distance_to(b) < Psn::MODULUS);
        }

        #[test]
        fn diff_antisymmetric(a in psn(), b in psn()) {
            let d = a.diff(b);
            prop_assert!((-(1 << 23)..(1 << 23)).contains(&d));
            if d != -(1 << 23) {
                prop_assert_eq!(b.diff(a), -d);
                prop_assert_eq!(a.serial_cmp(b), b.serial_cmp(a).reverse());
            }
            prop_assert_eq!(b.add(u32::from_ne_bytes(d.to_ne_bytes())), a);
        }

        #[test]
        fn small_steps_are_after(a in psn(), n in 1u32..Psn::HALF) {
            prop_assert!(a.add(n).after(a));
            prop_assert!(a.before(a.add(n)));
            prop_assert_eq!(a.add(n).region(a), PsnRegion::Ahead);
            prop_assert_eq!(a.sub(n).region(a), PsnRegion::Duplicate);
        }

        #[test]
        fn window_matches_distance(a in psn(), s in psn(), len in 0u32..=Psn::MODULUS) {
            let naive = (0..len.min(64)).any(|i| s.add(i) == a);
            if len <= 64 {
                prop_assert_eq!(a.in_window(s, len), naive);
            }
            prop_assert_eq!(a.in_window(s, len), s.distance_to(a) < len);
        }
    }
}
