//! Framing and encoding for the supervisor <-> worker link.
//!
//! A frame is a `u32` big-endian length prefix followed by a MessagePack body encoded as a
//! map with named fields (never positional arrays). Framing ([`LengthDelimitedCodec`]) is
//! separate from encoding ([`Codec`]). The length is checked against the cap before any
//! buffer for the body is allocated; a smaller cap ([`HANDSHAKE_MAX_FRAME`]) applies until the
//! handshake is done, then [`Codec::set_max_frame`] raises it to [`MAX_FRAME`].

use std::marker::PhantomData;

use bytes::{Bytes, BytesMut};
use serde::{de::DeserializeOwned, Serialize};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec, LengthDelimitedCodecError};

use crate::error::Error;

/// Largest frame accepted before the handshake completes.
pub const HANDSHAKE_MAX_FRAME: usize = 64 * 1024;
/// Largest frame accepted after the handshake.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Encodes a value as a named-field MessagePack body (no length prefix).
pub fn encode_body<T: Serialize>(value: &T) -> Result<Vec<u8>, Error> {
    Ok(rmp_serde::to_vec_named(value)?)
}

/// Decodes a MessagePack body (no length prefix).
pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    Ok(rmp_serde::from_slice(body)?)
}

/// A typed codec: decodes `In` frames, encodes `Out` frames.
pub struct Codec<In, Out> {
    framing: LengthDelimitedCodec,
    max: usize,
    _types: PhantomData<fn(Out) -> In>,
}

impl<In, Out> Codec<In, Out> {
    /// A codec that starts with the handshake frame cap.
    pub fn new() -> Self {
        Self::with_max_frame(HANDSHAKE_MAX_FRAME)
    }

    pub fn with_max_frame(max: usize) -> Self {
        let framing = LengthDelimitedCodec::builder()
            .length_field_length(4)
            .big_endian()
            .max_frame_length(max)
            .new_codec();
        Self {
            framing,
            max,
            _types: PhantomData,
        }
    }

    /// Changes the frame cap (both directions), e.g. after the handshake.
    pub fn set_max_frame(&mut self, max: usize) {
        self.framing.set_max_frame_length(max);
        self.max = max;
    }

    pub fn max_frame(&self) -> usize {
        self.max
    }
}

impl<In, Out> Default for Codec<In, Out> {
    fn default() -> Self {
        Self::new()
    }
}

fn map_io(err: std::io::Error, max: usize, len_hint: usize) -> Error {
    let too_big = err
        .get_ref()
        .is_some_and(|inner| inner.is::<LengthDelimitedCodecError>());
    if too_big {
        Error::FrameTooLarge { len: len_hint, max }
    } else {
        Error::Io(err)
    }
}

fn peek_len(src: &BytesMut) -> usize {
    match src.get(..4) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]) as usize,
        _ => 0,
    }
}

impl<In: DeserializeOwned, Out> Decoder for Codec<In, Out> {
    type Item = In;
    type Error = Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<In>, Error> {
        let len_hint = peek_len(src);
        match self.framing.decode(src) {
            Ok(Some(body)) => Ok(Some(decode_body(&body)?)),
            Ok(None) => Ok(None),
            Err(e) => Err(map_io(e, self.max, len_hint)),
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<In>, Error> {
        match self.decode(src)? {
            Some(item) => Ok(Some(item)),
            None if src.is_empty() => Ok(None),
            None => Err(Error::Truncated {
                remaining: src.len(),
            }),
        }
    }
}

impl<In, Out: Serialize> Encoder<Out> for Codec<In, Out> {
    type Error = Error;

    fn encode(&mut self, item: Out, dst: &mut BytesMut) -> Result<(), Error> {
        let body = encode_body(&item)?;
        if body.len() > self.max {
            return Err(Error::FrameTooLarge {
                len: body.len(),
                max: self.max,
            });
        }
        let len = body.len();
        self.framing
            .encode(Bytes::from(body), dst)
            .map_err(|e| map_io(e, self.max, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{ControlToWorker, WorkerToControl};

    #[test]
    fn round_trip_through_framing() {
        let mut tx: Codec<WorkerToControl, ControlToWorker> = Codec::new();
        let mut rx: Codec<ControlToWorker, WorkerToControl> = Codec::new();
        let mut buf = BytesMut::new();
        tx.encode(ControlToWorker::Ping { nonce: 7 }, &mut buf)
            .unwrap();
        let got = rx.decode(&mut buf).unwrap();
        assert_eq!(got, Some(ControlToWorker::Ping { nonce: 7 }));
        assert!(buf.is_empty());
    }

    #[test]
    fn partial_frame_waits_for_more_bytes() {
        let mut tx: Codec<WorkerToControl, ControlToWorker> = Codec::new();
        let mut rx: Codec<ControlToWorker, WorkerToControl> = Codec::new();
        let mut full = BytesMut::new();
        tx.encode(ControlToWorker::Ping { nonce: 1 }, &mut full)
            .unwrap();
        let mut part = BytesMut::from(&full[..full.len() - 1]);
        assert_eq!(rx.decode(&mut part).unwrap(), None);
        // The stream ends here: a truncated frame is an error, not a silent `None`.
        assert!(matches!(
            rx.decode_eof(&mut part),
            Err(Error::Truncated { .. })
        ));
    }

    #[test]
    fn oversized_length_is_rejected_before_allocation() {
        let mut rx: Codec<ControlToWorker, WorkerToControl> = Codec::new();
        let mut buf = BytesMut::new();
        // Claims a 4 GiB body; only the header is present.
        buf.extend_from_slice(&u32::MAX.to_be_bytes());
        let err = rx.decode(&mut buf).unwrap_err();
        assert!(matches!(err, Error::FrameTooLarge { max, .. } if max == HANDSHAKE_MAX_FRAME));
        assert!(buf.capacity() < 1024 * 1024);
    }

    #[test]
    fn garbage_body_is_a_decode_error() {
        let mut rx: Codec<ControlToWorker, WorkerToControl> = Codec::new();
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&5u32.to_be_bytes());
        buf.extend_from_slice(&[0xc1, 0xff, 0x00, 0x12, 0x99]);
        assert!(matches!(rx.decode(&mut buf), Err(Error::Decode(_))));
    }

    #[test]
    fn encoder_refuses_frames_over_the_cap() {
        let mut tx: Codec<WorkerToControl, ControlToWorker> = Codec::with_max_frame(16);
        let mut buf = BytesMut::new();
        let big = ControlToWorker::Cancel {
            run_id: "x".repeat(64),
            reason: crate::control::StopReason::Rpc,
        };
        assert!(matches!(
            tx.encode(big, &mut buf),
            Err(Error::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn cap_can_be_raised_after_handshake() {
        let mut rx: Codec<ControlToWorker, WorkerToControl> = Codec::new();
        let mut tx: Codec<WorkerToControl, ControlToWorker> = Codec::with_max_frame(MAX_FRAME);
        let msg = ControlToWorker::Cancel {
            run_id: "r".repeat(HANDSHAKE_MAX_FRAME),
            reason: crate::control::StopReason::Rpc,
        };
        let mut buf = BytesMut::new();
        tx.encode(msg.clone(), &mut buf).unwrap();
        let mut copy = buf.clone();
        assert!(rx.decode(&mut copy).is_err());
        rx.set_max_frame(MAX_FRAME);
        assert_eq!(rx.decode(&mut buf).unwrap(), Some(msg));
    }
}
