// SPDX-License-Identifier: GPL-2.0

//! Bounds-checked big-endian readers and writers over byte slices.
//!
//! All multi-byte fields of the IBA transport headers are big-endian
//! (network byte order). These cursors never index out of bounds: a short
//! buffer is an [`Error::Truncated`].
//!
//! The extension headers that are only a row of whole fields (IBTA Vol 1
//! §9.3) are declared with [`header!`], which writes their struct, `LEN`,
//! `parse` and `write` from the list of fields and their wire types
//! ([`Field`]).

#![forbid(unsafe_code)]

use super::error::{Error, Result};

/// A cursor that reads fields from the front of a byte slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// Reads the next `N` bytes.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (head, rest) = self.buf.split_first_chunk::<N>().ok_or(Error::Truncated)?;
        self.buf = rest;
        Ok(*head)
    }

    /// Reads one byte.
    pub(crate) fn u8(&mut self) -> Result<u8> {
        let [b] = self.array::<1>()?;
        Ok(b)
    }

    /// Reads a big-endian 16-bit field.
    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian 32-bit field.
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian 64-bit field.
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }
}

/// A cursor that writes fields to the front of a mutable byte slice.
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
}

impl<'a> Writer<'a> {
    /// Starts writing at the beginning of `buf`.
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf }
    }

    /// Writes `N` bytes.
    pub(crate) fn array<const N: usize>(&mut self, v: [u8; N]) -> Result {
        let buf = core::mem::take(&mut self.buf);
        let (head, rest) = buf.split_first_chunk_mut::<N>().ok_or(Error::Truncated)?;
        *head = v;
        self.buf = rest;
        Ok(())
    }

    /// Writes one byte.
    pub(crate) fn u8(&mut self, v: u8) -> Result {
        self.array([v])
    }

    /// Writes a big-endian 16-bit field.
    pub(crate) fn u16(&mut self, v: u16) -> Result {
        self.array(v.to_be_bytes())
    }

    /// Writes a big-endian 32-bit field.
    pub(crate) fn u32(&mut self, v: u32) -> Result {
        self.array(v.to_be_bytes())
    }

    /// Writes a big-endian 64-bit field.
    pub(crate) fn u64(&mut self, v: u64) -> Result {
        self.array(v.to_be_bytes())
    }
}

/// Fails with [`Error::Truncated`] unless `buf` holds at least `len` bytes.
///
/// Writers call this first so that a short buffer is never left half written.
pub(crate) fn check_len(buf: &[u8], len: usize) -> Result {
    if buf.len() < len {
        Err(Error::Truncated)
    } else {
        Ok(())
    }
}

/// How one field of a fixed-layout header sits on the wire.
///
/// The integers are big-endian fields of their own size, `[u8; N]` is `N`
/// opaque bytes; [`U24`] and [`ResvU24`] hold a `u32` in 24 bits.
pub(crate) trait Field {
    /// The type of the field in the decoded header.
    type Value: Copy;

    /// Bytes the field takes on the wire.
    const LEN: usize;

    /// Reads the field.
    fn read(r: &mut Reader<'_>) -> Result<Self::Value>;

    /// Fails with [`Error::FieldOutOfRange`] unless `v` fits the field.
    fn check(_v: Self::Value) -> Result {
        Ok(())
    }

    /// Writes the field; `v` has passed [`Field::check`].
    fn write(v: Self::Value, w: &mut Writer<'_>) -> Result;

    /// Every value that fits the field, for the round-trip tests.
    #[cfg(test)]
    fn any() -> proptest::strategy::BoxedStrategy<Self::Value>;
}

macro_rules! int_field {
    ($($t:ident),*) => {$(
        impl Field for $t {
            type Value = $t;
            const LEN: usize = core::mem::size_of::<$t>();

            fn read(r: &mut Reader<'_>) -> Result<$t> {
                r.$t()
            }

            fn write(v: $t, w: &mut Writer<'_>) -> Result {
                w.$t(v)
            }

            #[cfg(test)]
            fn any() -> proptest::strategy::BoxedStrategy<$t> {
                proptest::strategy::Strategy::boxed(proptest::arbitrary::any::<$t>())
            }
        }
    )*};
}

int_field!(u8, u16, u32, u64);

impl<const N: usize> Field for [u8; N] {
    type Value = [u8; N];
    const LEN: usize = N;

    fn read(r: &mut Reader<'_>) -> Result<[u8; N]> {
        r.array()
    }

    fn write(v: [u8; N], w: &mut Writer<'_>) -> Result {
        w.array(v)
    }

    #[cfg(test)]
    fn any() -> proptest::strategy::BoxedStrategy<[u8; N]> {
        proptest::strategy::Strategy::boxed(proptest::array::uniform(
            proptest::arbitrary::any::<u8>(),
        ))
    }
}

/// The largest value of a 24-bit field.
const U24_MAX: u32 = 0x00ff_ffff;

/// A 24-bit big-endian field in three bytes (AETH MSN).
pub(crate) struct U24;

impl Field for U24 {
    type Value = u32;
    const LEN: usize = 3;

    fn read(r: &mut Reader<'_>) -> Result<u32> {
        let [hi, mid, lo] = r.array()?;
        Ok(u32::from_be_bytes([0, hi, mid, lo]))
    }

    fn check(v: u32) -> Result {
        if v > U24_MAX {
            Err(Error::FieldOutOfRange)
        } else {
            Ok(())
        }
    }

    fn write(v: u32, w: &mut Writer<'_>) -> Result {
        let [_, hi, mid, lo] = v.to_be_bytes();
        w.array([hi, mid, lo])
    }

    #[cfg(test)]
    fn any() -> proptest::strategy::BoxedStrategy<u32> {
        proptest::strategy::Strategy::boxed(0..=U24_MAX)
    }
}

/// A reserved byte, ignored on parse and written as 0, then a [`U24`]
/// (DETH SrcQP).
pub(crate) struct ResvU24;

impl Field for ResvU24 {
    type Value = u32;
    const LEN: usize = 1 + U24::LEN;

    fn read(r: &mut Reader<'_>) -> Result<u32> {
        r.u8()?;
        U24::read(r)
    }

    fn check(v: u32) -> Result {
        U24::check(v)
    }

    fn write(v: u32, w: &mut Writer<'_>) -> Result {
        w.u8(0)?;
        U24::write(v, w)
    }

    #[cfg(test)]
    fn any() -> proptest::strategy::BoxedStrategy<u32> {
        U24::any()
    }
}

/// Declares a fixed-layout extension header: its struct, `LEN` (the sum of
/// its fields' wire lengths, checked at compile time against the length
/// the IBTA gives), `parse` and `write`, and a property test that `parse`
/// reads back every header `write` accepts.
///
/// Each field is written `pub name: Type`, its wire form [`Field`] for
/// `Type`, or `pub name: Type as Wire` for another wire form of the same
/// value type (e.g. `u32 as U24`). Fields are laid out in the order given.
///
/// ```text
/// header! {
///     /// A decoded IETH.
///     #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
///     pub struct Ieth("IETH", 4) {
///         /// R_Key to invalidate.
///         pub rkey: u32,
///     }
/// }
/// ```
macro_rules! header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident($hdr:literal, $len:literal) {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident: $ty:ty $(as $wire:ty)?
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $(
                $(#[$fmeta])*
                pub $field: $ty,
            )+
        }

        impl $name {
            #[doc = concat!("Length of the ", $hdr, " in bytes.")]
            pub const LEN: usize =
                0 $(+ <$crate::proto::wire::header!(@wire $ty $(as $wire)?)
                    as $crate::proto::wire::Field>::LEN)+;

            #[doc = concat!("Decodes the ", $hdr, " at the start of `buf`.")]
            ///
            /// # Errors
            ///
            #[doc = concat!(
                "[`super::Error::Truncated`] if `buf` is shorter than [`",
                stringify!($name),
                "::LEN`]."
            )]
            pub fn parse(buf: &[u8]) -> $crate::proto::Result<Self> {
                let mut r = $crate::proto::wire::Reader::new(buf);
                Ok(Self {
                    $(
                        $field: <$crate::proto::wire::header!(@wire $ty $(as $wire)?)
                            as $crate::proto::wire::Field>::read(&mut r)?,
                    )+
                })
            }

            #[doc = concat!(
                "Encodes the ", $hdr, " into the first [`",
                stringify!($name),
                "::LEN`] bytes of `buf`."
            )]
            ///
            /// # Errors
            ///
            /// [`super::Error::Truncated`] if `buf` is too short,
            /// [`super::Error::FieldOutOfRange`] if a value does not fit its
            /// field (only a 24-bit one can fail). Nothing is written on
            /// error.
            pub fn write(&self, buf: &mut [u8]) -> $crate::proto::Result {
                $crate::proto::wire::check_len(buf, Self::LEN)?;
                $(
                    <$crate::proto::wire::header!(@wire $ty $(as $wire)?)
                        as $crate::proto::wire::Field>::check(self.$field)?;
                )+
                let mut w = $crate::proto::wire::Writer::new(buf);
                $(
                    <$crate::proto::wire::header!(@wire $ty $(as $wire)?)
                        as $crate::proto::wire::Field>::write(self.$field, &mut w)?;
                )+
                Ok(())
            }
        }

        const _: () = assert!(
            $name::LEN == $len,
            concat!("the ", $hdr, " is ", stringify!($len), " bytes")
        );

        #[cfg(test)]
        impl $crate::proto::wire::tests::Header for $name {
            const LEN: usize = $name::LEN;

            fn parse(buf: &[u8]) -> $crate::proto::Result<Self> {
                $name::parse(buf)
            }

            fn write(&self, buf: &mut [u8]) -> $crate::proto::Result {
                $name::write(self, buf)
            }
        }

        #[cfg(test)]
        mod header_roundtrip {
            use super::*;

            proptest::proptest! {
                #[test]
                fn roundtrip($(
                    $field in <$crate::proto::wire::header!(@wire $ty $(as $wire)?)
                        as $crate::proto::wire::Field>::any()
                ),+) {
                    let h = $name { $($field),+ };
                    let mut buf = [0xffu8; $len];
                    h.write(&mut buf).unwrap();
                    proptest::prop_assert_eq!($name::parse(&buf), Ok(h));
                }
            }
        }
    };
    (@wire $ty:ty) => { $ty };
    (@wire $ty:ty as $wire:ty) => { $wire };
}

pub(crate) use header;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use core::fmt::Debug;

    /// What [`assert_known_bytes`] needs of a header: [`header!`]
    /// implements it.
    pub(crate) trait Header: Copy + Debug + PartialEq + Sized {
        const LEN: usize;
        fn parse(buf: &[u8]) -> Result<Self>;
        fn write(&self, buf: &mut [u8]) -> Result;
    }

    /// Checks that `h` is encoded as exactly `bytes` (over a buffer of
    /// ones, so no byte is left unwritten), that `bytes` decode as `h`, and
    /// that one byte fewer is [`Error::Truncated`] both ways.
    pub(crate) fn assert_known_bytes<H: Header>(h: H, bytes: &[u8]) {
        assert_eq!(bytes.len(), H::LEN);
        let mut out = [0xffu8; 64];
        let out = &mut out[..H::LEN];
        h.write(out).unwrap();
        assert_eq!(out, bytes);
        assert_eq!(H::parse(bytes), Ok(h));
        assert_eq!(H::parse(&bytes[..H::LEN - 1]), Err(Error::Truncated));
        assert_eq!(h.write(&mut out[..H::LEN - 1]), Err(Error::Truncated));
    }

    /// Checks that writing `h` fails with [`Error::FieldOutOfRange`] and
    /// leaves the buffer as it was.
    pub(crate) fn assert_out_of_range<H: Header>(h: H) {
        let mut out = [0xa5u8; 64];
        assert_eq!(h.write(&mut out[..H::LEN]), Err(Error::FieldOutOfRange));
        assert_eq!(out, [0xa5u8; 64]);
    }

    #[test]
    fn u24_fields() {
        let mut buf = [0xffu8; 4];
        ResvU24::write(0x12_3456, &mut Writer::new(&mut buf)).unwrap();
        assert_eq!(buf, [0, 0x12, 0x34, 0x56]);
        assert_eq!(
            ResvU24::read(&mut Reader::new(&[0xee, 1, 2, 3])),
            Ok(0x01_0203)
        );
        assert_eq!(U24::read(&mut Reader::new(&[1, 2, 3])), Ok(0x01_0203));
        assert_eq!(U24::check(U24_MAX), Ok(()));
        assert_eq!(U24::check(U24_MAX + 1), Err(Error::FieldOutOfRange));
        assert_eq!(ResvU24::check(U24_MAX + 1), Err(Error::FieldOutOfRange));
    }
}
