//! The download client's connections with the test's socket options.
//!
//! Why by hand: ureq's own connector opens its sockets with no options, and its TCP
//! transport type is private, so the options a user asks for (`-s`, `-S`, `-C`, `--mss`,
//! `--tos`, `--busy-poll`) would not reach the client's end of an http test. A
//! [`Connector`] and a [`Transport`] are ureq's extension points for exactly this: the
//! connection is opened here (the options that shape the SYN set first, as for every
//! other data connection), and ureq does all of the HTTP over it. Its `unversioned` API may
//! change between ureq releases; Cargo.lock pins the one this was written against.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};
use virtperf_wire::SockOpts;

use crate::sock::{data_protocol, prepare_before_connect, prepare_data_socket};

/// Called with each connection just opened (to read back what the kernel applied).
pub type OnConnect = Arc<dyn Fn(&TcpStream) + Send + Sync>;

/// Opens each download's connection with `opts`; reads and writes time out after
/// `io_timeout` (the socket's own timeouts, as on every data connection).
#[derive(Clone)]
pub struct SockConnector {
    opts: SockOpts,
    io_timeout: Duration,
    on_connect: OnConnect,
}

impl SockConnector {
    /// A connector applying `opts`, calling `on_connect` with every new connection.
    pub fn new(opts: SockOpts, io_timeout: Duration, on_connect: OnConnect) -> SockConnector {
        SockConnector {
            opts,
            io_timeout,
            on_connect,
        }
    }

    fn open(&self, addr: std::net::SocketAddr) -> io::Result<TcpStream> {
        let raw = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(data_protocol(&self.opts)),
        )?;
        prepare_before_connect(&raw, &self.opts)?;
        raw.connect_timeout(&addr.into(), self.io_timeout)?;
        let s = TcpStream::from(raw);
        // ureq's default: TCP_NODELAY, unless the options say otherwise.
        prepare_data_socket(&s, self.io_timeout, true, &self.opts)?;
        Ok(s)
    }
}

impl fmt::Debug for SockConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SockConnector")
            .field("opts", &self.opts)
            .finish()
    }
}

impl Connector<()> for SockConnector {
    type Out = SockTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<SockTransport>, ureq::Error> {
        let mut last = None;
        for addr in details.addrs.iter() {
            match self.open(*addr) {
                Ok(stream) => {
                    (self.on_connect)(&stream);
                    let c = details.config;
                    return Ok(Some(SockTransport {
                        stream,
                        buffers: LazyBuffers::new(c.input_buffer_size(), c.output_buffer_size()),
                    }));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last
            .unwrap_or_else(|| io::Error::other("the host resolved to no address"))
            .into())
    }
}

/// One download's connection. The socket's own timeouts bound every read and write (so
/// ureq's per-call deadlines are not re-applied per call); never reused: each download is
/// its own connection.
#[derive(Debug)]
pub struct SockTransport {
    stream: TcpStream,
    buffers: LazyBuffers,
}

impl Transport for SockTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, _timeout: NextTimeout) -> Result<(), ureq::Error> {
        let output = &self.buffers.output()[..amount];
        (&self.stream).write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, _timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let input = self.buffers.input_append_buf();
        let n = loop {
            match (&self.stream).read(input) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        };
        self.buffers.input_appended(n);
        Ok(n > 0)
    }

    fn is_open(&mut self) -> bool {
        // One download per connection (`Connection: close`): never handed out again.
        false
    }
}
