//! The README's example, whole: a server that accepts one connection and reads what the
//! client writes, and a client that writes the connection's stream, sends a message and
//! opens a stream of its own. It is built by
//! `cargo test`, so the README cannot show code that does not compile.
//!
//! Run: `cargo run --release -p ctp --example readme`

use ctp::{Endpoint, EndpointOptions, Profile, StreamKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The server: `EndpointOptions::server()` accepts connections (a client's does not).
    let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::server()).await?;
    let addr = server.local_addr()?;
    let serving = tokio::spawn(async move {
        let mut conn = server.accept().await.expect("a connection");
        let mut text = String::new();
        conn.read_to_string(&mut text).await?; // the stream, up to the client's shutdown
        let msg = conn.recv_msg().await?; // a message, whole
        let mut stream = conn.accept_stream().await?; // a stream the client opened
        let mut more = String::new();
        stream.read_to_string(&mut more).await?;
        let mut req = conn.accept_stream().await?; // a request, for the service it names
        let mut get = String::new();
        req.read_to_string(&mut get).await?;
        assert_eq!((req.service(), get.as_str()), (Some(80), "GET /"));
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((text, msg, more))
    });

    // The client.
    let ep = Endpoint::bind("0.0.0.0:0".parse()?, EndpointOptions::default()).await?;
    let mut conn = ep.connect(addr, &Profile::reliable()).await?;
    conn.write_all(b"hello").await?; // tokio AsyncWrite; AsyncRead on the other side
    conn.send_msg(bytes::Bytes::from_static(b"a message"))
        .await?;
    conn.shutdown().await?; // ends the byte stream
                            // More streams, each ordered on its own, by priority (higher first); no round trip.
    let mut stream = conn.open_stream(StreamKind::Bidirectional, 7)?;
    stream.write_all(b"on a stream").await?;
    stream.shutdown().await?; // ends this stream
    let req = conn.open_stream_for(StreamKind::Unidirectional, 0, 80)?; // for service 80
    req.write_last(b"GET /").await?; // opening, data and end: one packet
    println!("{:?}", conn.stats()); // packets, bytes, retransmissions, RTT, cwnd, …

    let (text, msg, more) = serving.await?.map_err(|e| e.to_string())?;
    assert_eq!((text.as_str(), &msg[..]), ("hello", &b"a message"[..]));
    assert_eq!(more, "on a stream");
    conn.close().await?; // graceful: resolves once everything is delivered
    println!(
        "server got {text:?} and {:?}",
        String::from_utf8_lossy(&msg)
    );
    Ok(())
}
