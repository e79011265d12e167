//! Unit tests of the SPDY/3 framing: the dictionary, frames as spdystream writes them, round
//! trips, and bad input refused without a panic.

use super::*;

fn h(pairs: &[(&str, &str)]) -> Headers {
    let own = |(n, v): &(&str, &str)| (n.to_string(), v.to_string());
    pairs.iter().map(own).collect()
}

fn adler32(b: &[u8]) -> u32 {
    let (mut a, mut s) = (1u32, 0u32);
    for x in b {
        a = (a + u32::from(*x)) % 65521;
        s = (s + a) % 65521;
    }
    (s << 16) | a
}

async fn read_all(mut bytes: &[u8]) -> Vec<Frame> {
    let mut inf = Inflater::new();
    let mut out = Vec::new();
    while let Some(f) = read_frame(&mut bytes, &mut inf).await.unwrap() {
        out.push(f);
    }
    out
}

/// The dictionary is SPDY/3's: its length and the Adler-32 a zlib header names it by.
#[test]
fn the_dictionary_is_spdy3s() {
    assert_eq!(dictionary().len(), 1423);
    assert_eq!(adler32(dictionary()), 0xe3c6_a7c2);
}

/// Two SYN_STREAM frames as spdystream v0.5.1's Framer writes them (one zlib stream over
/// both blocks, the first naming the dictionary), read back.
#[tokio::test]
async fn frames_written_by_spdystream_are_read() {
    let hex = concat!(
        "80030001000000290000000100000000000078f9e3c6a7c26260606004a7b392a2d4c45c6851c29a0a",
        "0a6800000000ffff800300010100001c00000003000000000000824ab114e41781738191b1b9250000",
        "00ffff"
    );
    let wire: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let frames = read_all(&wire).await;
    assert_eq!(
        frames,
        [
            Frame::SynStream(1, 0, h(&[("streamtype", "error")])),
            Frame::SynStream(3, FLAG_FIN, h(&[("port", "2379")])),
        ]
    );
}

/// Every frame type survives encode and decode; header blocks share one zlib stream, whose
/// header names the SPDY/3 dictionary as spdystream's reader requires; several values of a
/// name travel NUL-joined.
#[tokio::test]
async fn frames_round_trip() {
    let pf = h(&[("streamtype", "data"), ("port", "2379"), ("requestid", "0")]);
    let frames = vec![
        Frame::SynStream(1, 0, pf),
        Frame::SynReply(1, 0, Headers::new()),
        Frame::Headers(1, FLAG_FIN, h(&[("a", "1"), ("a", "3"), ("b", "2")])),
        Frame::Data(1, FLAG_FIN, b"hello".to_vec()),
        Frame::RstStream(3, CANCEL),
        Frame::Settings(1, vec![(1, 7, 65536)]),
        Frame::Ping(7),
        Frame::GoAway(5, 0),
        Frame::WindowUpdate(1, 4096),
        Frame::Data(3, 0, vec![7; MAX_CHUNK]),
    ];
    let mut d = Deflater::new().unwrap();
    let mut wire = Vec::new();
    for f in &frames {
        wire.extend(encode(f, &mut d).unwrap());
    }
    // SYN_STREAM's block starts after 8 + 10 bytes: a zlib header with FDICT and the id.
    assert_eq!(wire[18] & 0x0f, 8);
    assert_ne!(wire[19] & 0x20, 0, "FDICT");
    assert_eq!(wire[20..24], 0xe3c6_a7c2u32.to_be_bytes());
    assert_eq!(read_all(&wire).await, frames);
}

/// Bad input is an error, never a panic: a wrong version, short frames, stream 0, a header
/// count beyond its block, a block that inflates past the limit, one that is not zlib, a
/// connection that ends inside a frame.
#[tokio::test]
async fn bad_frames_are_refused() {
    let head = |w: u32, len: usize| {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&w.to_be_bytes());
        b[4..].copy_from_slice(&(len as u32).to_be_bytes());
        b
    };
    let mut inf = Inflater::new();
    assert!(decode(head(0x8002_0006, 4), &[0, 0, 0, 1], &mut inf).is_err());
    assert!(decode(head(0x8003_0006, 3), &[0, 0, 1], &mut inf).is_err());
    assert!(decode(head(0x8003_0003, 8), &[0; 8], &mut inf).is_err());
    assert!(decode(head(0, 0), &[], &mut inf).is_err());
    assert!(decode(head(0x8003_0004, 4), &[0, 0, 0, 9], &mut inf).is_err());
    assert_eq!(decode(head(0x8003_00ff, 0), &[], &mut inf).unwrap(), None);
    let mut lie = vec![0, 0, 0, 1];
    Deflater::new()
        .unwrap()
        .block(&[0, 0, 1, 0], &mut lie)
        .unwrap();
    assert!(decode(head(0x8003_0002, lie.len()), &lie, &mut inf).is_err());
    let big = h(&[("x", &"y".repeat(MAX_HEADER_BLOCK))]);
    let wire = encode(&Frame::SynReply(1, 0, big), &mut Deflater::new().unwrap()).unwrap();
    assert!(
        read_frame(&mut &wire[..], &mut Inflater::new())
            .await
            .is_err()
    );
    let junk = [0, 0, 0, 1, 1, 2, 3, 4, 5, 6];
    assert!(decode(head(0x8003_0002, 10), &junk, &mut Inflater::new()).is_err());
    let cut = [0x80u8, 3, 0];
    assert!(
        read_frame(&mut &cut[..], &mut Inflater::new())
            .await
            .is_err()
    );
}
