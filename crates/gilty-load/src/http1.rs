//! The HTTP/1.1 client side the generator needs and no more: a URL split into what goes on the
//! wire, a request serialized once per run, and one response read off a keep-alive connection (the
//! head parsed with `httparse`; the body framed by Content-Length, chunked encoding or the connection's close, and
//! discarded). No per-request allocation: one buffer per connection.

use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest response head accepted; a server that sends more is answering something else.
const MAX_HEAD: usize = 64 * 1024;
const BUFFER: usize = 16 * 1024;
const MAX_HEADERS: usize = 96;

/// `http://host[:port]/path?query` split for the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// Path and query, as sent in the request line ("/" when the URL has none).
    pub path: String,
}

impl Target {
    /// The Host header's value: the port only when it is not 80, as browsers send it.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == 80 {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

pub fn parse_url(url: &str) -> Result<Target, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
    let bad = |why: &str| format!("{url}: not a valid URL ({why})");
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'?' => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let path = path.split('#').next().unwrap_or("/").to_string();
    if authority.contains('@') {
        return Err(bad("user names in URLs are not supported"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port = match port {
        None | Some("") => 80,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad("bad port"))?,
    };
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad("spaces or control characters in the path"));
    }
    Ok(Target {
        host: host.to_string(),
        port,
        path,
    })
}

/// RFC 9110 token characters: what a method or a header name may contain.
pub fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The request's bytes, written as they are for every arrival that uses it.
pub fn serialize(
    method: &str,
    target: &Target,
    headers: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + body.len());
    out.extend_from_slice(format!("{method} {} HTTP/1.1\r\n", target.path).as_bytes());
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    if !has("host") {
        out.extend_from_slice(format!("Host: {}\r\n", target.authority()).as_bytes());
    }
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    let body_expected = !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH");
    if body_expected && !has("content-length") && !has("transfer-encoding") {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

#[derive(Debug)]
pub enum ExchangeError {
    /// The connection ended or broke; `fresh` when not one byte of the answer had arrived (an idle
    /// keep-alive connection the server closed: the request may be sent again on a new one).
    Broken { fresh: bool },
    /// Not an HTTP/1.x answer.
    Malformed,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    pub status: u16,
    /// Whether the connection can carry the next request.
    pub keep_alive: bool,
}

enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

/// One keep-alive connection and its read buffer (`buf[start..end]` is read but not yet consumed).
pub struct Connection {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Connection {
    pub async fn open(addr: std::net::SocketAddr) -> io::Result<Connection> {
        let stream = TcpStream::connect(addr).await?;
        // The request goes out in one write and nothing follows it, but Nagle's algorithm would
        // still hold a write made while the previous answer's ACK is pending.
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            buf: vec![0; BUFFER],
            start: 0,
            end: 0,
        })
    }

    /// Sends `request` and reads its answer; the body is read and dropped.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
    ) -> Result<Answer, ExchangeError> {
        self.start = 0;
        self.end = 0;
        self.stream
            .write_all(request)
            .await
            .map_err(|_| ExchangeError::Broken { fresh: true })?;
        let mut received = false;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut headers);
            let parsed = resp
                .parse(&self.buf[self.start..self.end])
                .map_err(|_| ExchangeError::Malformed)?;
            let httparse::Status::Complete(head_len) = parsed else {
                if self.end - self.start >= MAX_HEAD {
                    return Err(ExchangeError::Malformed);
                }
                if self.fill().await? == 0 {
                    return Err(ExchangeError::Broken { fresh: !received });
                }
                received = true;
                continue;
            };
            let status = resp.code.unwrap_or(0);
            let http11 = resp.version == Some(1);
            let (mut length, mut chunked, mut close, mut keep) = (None, false, false, false);
            for h in resp.headers.iter() {
                if h.name.eq_ignore_ascii_case("content-length") {
                    let text =
                        std::str::from_utf8(h.value).map_err(|_| ExchangeError::Malformed)?;
                    length = Some(
                        text.trim()
                            .parse::<u64>()
                            .map_err(|_| ExchangeError::Malformed)?,
                    );
                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = contains_token(h.value, b"chunked");
                } else if h.name.eq_ignore_ascii_case("connection") {
                    close |= contains_token(h.value, b"close");
                    keep |= contains_token(h.value, b"keep-alive");
                }
            }
            self.start += head_len;
            if (100..200).contains(&status) && status != 101 {
                continue; // an interim answer (100 Continue, 103 Early Hints): the real one follows
            }
            let framing = if head_request || status == 204 || status == 304 {
                Framing::Length(0)
            } else if chunked {
                Framing::Chunked
            } else if let Some(n) = length {
                Framing::Length(n)
            } else {
                Framing::UntilClose
            };
            let mut keep_alive = if http11 { !close } else { keep && !close };
            match framing {
                Framing::Length(n) => self.skip(n).await?,
                Framing::Chunked => self.skip_chunked().await?,
                Framing::UntilClose => {
                    while self.fill_discarding().await? > 0 {}
                    keep_alive = false;
                }
            }
            return Ok(Answer { status, keep_alive });
        }
    }

    /// Reads more into the buffer after what is there; 0 at the end of the stream.
    async fn fill(&mut self) -> Result<usize, ExchangeError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let n = self
            .stream
            .read(&mut self.buf[self.end..])
            .await
            .map_err(|_| ExchangeError::Broken { fresh: false })?;
        self.end += n;
        Ok(n)
    }

    /// Reads and drops whatever arrives (a body without a length ends with the connection).
    async fn fill_discarding(&mut self) -> Result<usize, ExchangeError> {
        self.start = 0;
        self.end = 0;
        self.fill().await
    }

    /// Consumes `n` body bytes, buffered or still to come.
    async fn skip(&mut self, mut n: u64) -> Result<(), ExchangeError> {
        loop {
            let have = (self.end - self.start) as u64;
            if have >= n {
                self.start += n as usize;
                return Ok(());
            }
            n -= have;
            if self.fill_discarding().await? == 0 {
                return Err(ExchangeError::Broken { fresh: false });
            }
        }
    }

    /// Consumes a chunked body: size lines, data and CRLFs, the last chunk and any trailers.
    async fn skip_chunked(&mut self) -> Result<(), ExchangeError> {
        loop {
            let size = loop {
                match httparse::parse_chunk_size(&self.buf[self.start..self.end]) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        self.start += used;
                        break size;
                    }
                    Ok(httparse::Status::Partial) => self.need_more().await?,
                    Err(_) => return Err(ExchangeError::Malformed),
                }
            };
            if size == 0 {
                break;
            }
            self.skip(size).await?;
            self.expect_crlf().await?;
        }
        // Trailers (usually none) end with an empty line.
        loop {
            let rest = &self.buf[self.start..self.end];
            if rest.starts_with(b"\r\n") {
                self.start += 2;
                return Ok(());
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            match httparse::parse_headers(rest, &mut headers) {
                Ok(httparse::Status::Complete((used, _))) => {
                    self.start += used;
                    return Ok(());
                }
                Ok(httparse::Status::Partial) => self.need_more().await?,
                Err(_) => return Err(ExchangeError::Malformed),
            }
        }
    }

    async fn expect_crlf(&mut self) -> Result<(), ExchangeError> {
        while self.end - self.start < 2 {
            self.need_more().await?;
        }
        if &self.buf[self.start..self.start + 2] != b"\r\n" {
            return Err(ExchangeError::Malformed);
        }
        self.start += 2;
        Ok(())
    }

    async fn need_more(&mut self) -> Result<(), ExchangeError> {
        if self.end - self.start >= MAX_HEAD {
            return Err(ExchangeError::Malformed);
        }
        match self.fill().await? {
            0 => Err(ExchangeError::Broken { fresh: false }),
            _ => Ok(()),
        }
    }
}

/// Whether a comma-separated header value lists `token` (case-insensitive).
fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|b| *b == b',')
        .any(|part| part.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_for_the_wire() {
        let t = parse_url("http://127.0.0.1:8000/a/b?x=1#frag").unwrap();
        assert_eq!(
            t,
            Target {
                host: "127.0.0.1".into(),
                port: 8000,
                path: "/a/b?x=1".into()
            }
        );
        assert_eq!(t.authority(), "127.0.0.1:8000");
        let t = parse_url("http://localhost").unwrap();
        assert_eq!(
            (t.port, t.path.as_str(), t.authority()),
            (80, "/", "localhost".to_string())
        );
        assert_eq!(parse_url("http://h?q").unwrap().path, "/?q");
        assert_eq!(
            parse_url("http://[::1]:81/").unwrap().authority(),
            "[::1]:81"
        );
        assert!(parse_url("https://h/")
            .unwrap_err()
            .contains("only http://"));
        assert!(parse_url("http://h:99999/")
            .unwrap_err()
            .contains("bad port"));
        assert!(parse_url("http:///x").unwrap_err().contains("no host"));
        assert!(parse_url("http://h/a b").is_err());
    }

    #[test]
    fn requests_carry_host_and_length() {
        let t = parse_url("http://127.0.0.1:8000/p").unwrap();
        let get = serialize("GET", &t, &[("X-A".into(), "1".into())], b"");
        assert_eq!(
            get,
            b"GET /p HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nX-A: 1\r\n\r\n"
        );
        let post = serialize("POST", &t, &[], b"hi");
        assert_eq!(
            post,
            b"POST /p HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Length: 2\r\n\r\nhi"
        );
        assert!(is_token("GET") && !is_token("G T") && !is_token(""));
    }

    #[test]
    fn header_tokens() {
        assert!(contains_token(b"gzip, Chunked", b"chunked"));
        assert!(!contains_token(b"keep-alive", b"close"));
    }
}
